package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/berth-agent/berth/internal/nodestatus"
)

// ClusterSettings join berth to a Kubernetes cluster (internal/nodestatus,
// internal/mirror), embedded in settings: off while Kubeconfig is empty.
// Names are the kubelet's flags and KubeletConfiguration fields.
type ClusterSettings struct {
	Kubeconfig                string            `json:"kubeconfig,omitempty"`
	NodeLabels                map[string]string `json:"nodeLabels,omitempty"`
	RegisterWithTaints        []v1.Taint        `json:"registerWithTaints,omitempty"`
	NodeStatusReportFrequency metav1.Duration   `json:"nodeStatusReportFrequency,omitempty"`
	// BootstrapKubeconfig and RotateCertificates get and renew the
	// credentials of Kubeconfig by CSRs (internal/nodecert).
	BootstrapKubeconfig string `json:"bootstrapKubeconfig,omitempty"`
	RotateCertificates  bool   `json:"rotateCertificates"`
	// HealthzBindAddress and HealthzPort are the kubelet's healthz
	// endpoint, which kubeadm's kubelet-check polls: served with a
	// Kubeconfig only, port 0 disables it.
	HealthzBindAddress string `json:"healthzBindAddress,omitempty"`
	HealthzPort        int    `json:"healthzPort"`
}

// Defaults of the cluster settings: the kubelet's.
const (
	DefaultHealthzBindAddress = "127.0.0.1"
	DefaultHealthzPort        = 10248
)

// HealthzAddress is where the kubelet's healthz endpoint is served, ""
// for nowhere: without a Kubeconfig berth takes no kubelet role and its
// /healthz is on --listen alone.
func (s ClusterSettings) HealthzAddress() string {
	if s.Kubeconfig == "" || s.HealthzPort == 0 {
		return ""
	}
	return net.JoinHostPort(s.HealthzBindAddress, strconv.Itoa(s.HealthzPort))
}

// bindClusterFlags registers the cluster settings as flags.
func bindClusterFlags(fs *pflag.FlagSet, s *ClusterSettings) {
	fs.StringVar(&s.Kubeconfig, "kubeconfig", s.Kubeconfig, "kubeconfig of the node's credentials for an API server: berth then registers its Node, renews its Lease and keeps a mirror pod per static pod (\"\": no cluster)")
	fs.Var(labelsFlag{&s.NodeLabels}, "node-labels", "labels set on the Node at registration, as key=value (repeatable or comma-separated); kubernetes.io and k8s.io keys only those the kubelet may set")
	fs.Var(taintsFlag{&s.RegisterWithTaints}, "register-with-taints", "taints set on the Node at registration, as key[=value]:Effect (repeatable or comma-separated)")
	durationVar(fs, &s.NodeStatusReportFrequency, "node-status-report-frequency", "how often the Node's status is written when nothing changed (changes are written within 10s)")
	fs.StringVar(&s.BootstrapKubeconfig, "bootstrap-kubeconfig", s.BootstrapKubeconfig, "kubeconfig of bootstrap credentials (kubeadm's bootstrap-kubelet.conf): when --kubeconfig is missing or its certificate expired, berth requests a client certificate with them and writes --kubeconfig")
	fs.BoolVar(&s.RotateCertificates, "rotate-certificates", s.RotateCertificates, "request a new client certificate at 70-90% of the current one's lifetime (with --bootstrap-kubeconfig)")
	fs.StringVar(&s.HealthzBindAddress, "healthz-bind-address", s.HealthzBindAddress, "IP address of the kubelet's healthz endpoint (with --kubeconfig)")
	fs.IntVar(&s.HealthzPort, "healthz-port", s.HealthzPort, "port of the kubelet's healthz endpoint, serving /healthz as --listen does (with --kubeconfig; 0 disables it)")
}

// validateCluster checks them as the kubelet does.
func (s ClusterSettings) validateCluster() []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(s.NodeLabels)) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("--node-labels: key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(s.NodeLabels[k]) {
			errs = append(errs, fmt.Errorf("--node-labels: %s: value %q: %s", k, s.NodeLabels[k], msg))
		}
		if !nodeMaySetLabel(k) {
			errs = append(errs, fmt.Errorf("--node-labels: %s: a node may set no label of the kubernetes.io or k8s.io namespaces but the kubelet's (kubelet.kubernetes.io/, node.kubernetes.io/ and the well-known ones); the NodeRestriction admission plugin refuses it", k))
		}
	}
	for _, t := range s.RegisterWithTaints {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, fmt.Errorf("--register-with-taints: key %q: %s", t.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, fmt.Errorf("--register-with-taints: %s: value %q: %s", t.Key, t.Value, msg))
		}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			errs = append(errs, fmt.Errorf("--register-with-taints: %s: effect %q is none of NoSchedule, PreferNoSchedule, NoExecute", t.Key, t.Effect))
		}
	}
	if f := s.NodeStatusReportFrequency.Duration; f < 10*time.Second {
		errs = append(errs, fmt.Errorf("--node-status-report-frequency must be at least 10s, got %s", f))
	}
	if s.Kubeconfig == "" && (len(s.NodeLabels) > 0 || len(s.RegisterWithTaints) > 0) {
		errs = append(errs, errors.New("--node-labels and --register-with-taints need a --kubeconfig"))
	}
	if s.Kubeconfig == "" && s.BootstrapKubeconfig != "" {
		errs = append(errs, errors.New("--bootstrap-kubeconfig needs a --kubeconfig: the file berth writes the node's credentials to"))
	}
	if s.HealthzPort < 0 || s.HealthzPort > 65535 {
		errs = append(errs, fmt.Errorf("--healthz-port must be between 0 and 65535, got %d", s.HealthzPort))
	}
	if s.HealthzPort != 0 && net.ParseIP(s.HealthzBindAddress) == nil {
		errs = append(errs, fmt.Errorf("--healthz-bind-address %q is no IP address", s.HealthzBindAddress))
	}
	return errs
}

// The kubelet's own labels of the kubernetes.io namespace (its
// kubeletapis.IsKubeletLabel): the only ones NodeRestriction lets a node
// set on itself.
var kubeletLabels = map[string]bool{
	"kubernetes.io/hostname": true, "kubernetes.io/os": true, "kubernetes.io/arch": true,
	"beta.kubernetes.io/os": true, "beta.kubernetes.io/arch": true, "beta.kubernetes.io/instance-type": true,
	"node.kubernetes.io/instance-type":         true,
	"failure-domain.beta.kubernetes.io/region": true, "failure-domain.beta.kubernetes.io/zone": true,
	"topology.kubernetes.io/region": true, "topology.kubernetes.io/zone": true,
}

func nodeMaySetLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	switch {
	case kubeletLabels[key]:
		return true
	case prefix == "kubelet.kubernetes.io" || strings.HasSuffix(prefix, ".kubelet.kubernetes.io"),
		prefix == "node.kubernetes.io" || strings.HasSuffix(prefix, ".node.kubernetes.io"):
		return true
	case prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io"),
		prefix == "k8s.io" || strings.HasSuffix(prefix, ".k8s.io"):
		return false
	}
	return true
}

// NodeConfig is the node controller's configuration when --kubeconfig is
// set: the Node's labels are the config file's labels and --node-labels
// (which win); the client, capacity, node info and the shared parts are
// the daemon's to fill in.
func (s Settings) NodeConfig(nodeName, hostIP string) nodestatus.Config {
	labels := maps.Clone(s.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, s.NodeLabels)
	return nodestatus.Config{
		NodeName:        nodeName,
		Hostname:        nodeName,
		Labels:          labels,
		Taints:          slices.Clone(s.RegisterWithTaints),
		NodeIP:          hostIP,
		MaxPods:         s.MaxPods,
		ReportFrequency: s.NodeStatusReportFrequency.Duration,
	}
}

// labelsFlag collects key=value labels, repeatable or comma-separated.
type labelsFlag struct{ m *map[string]string }

func (f labelsFlag) String() string { return strings.Join(f.GetSlice(), ",") }

// Type names the value in help.
func (f labelsFlag) Type() string { return "key=value" }

// GetSlice is the labels as key=value, sorted.
func (f labelsFlag) GetSlice() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(*f.m)) {
		out = append(out, k+"="+(*f.m)[k])
	}
	return out
}

func (f labelsFlag) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("label %q is not key=value", part)
		}
		if *f.m == nil {
			*f.m = map[string]string{}
		}
		(*f.m)[k] = val
	}
	return nil
}

// Append adds labels, as Set.
func (f labelsFlag) Append(v string) error { return f.Set(v) }

// Replace sets the labels to vs.
func (f labelsFlag) Replace(vs []string) error {
	*f.m = nil
	for _, v := range vs {
		if err := f.Set(v); err != nil {
			return err
		}
	}
	return nil
}

// taintsFlag collects key[=value]:Effect taints, repeatable or
// comma-separated, as the kubelet's --register-with-taints.
type taintsFlag struct{ l *[]v1.Taint }

func (f taintsFlag) String() string { return strings.Join(f.GetSlice(), ",") }

// Type names the value in help.
func (f taintsFlag) Type() string { return "key=value:Effect" }

// GetSlice is the taints as key[=value]:Effect.
func (f taintsFlag) GetSlice() []string {
	var out []string
	for _, t := range *f.l {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		out = append(out, s+":"+string(t.Effect))
	}
	return out
}

func (f taintsFlag) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		kv, effect, ok := strings.Cut(part, ":")
		if !ok {
			return fmt.Errorf("taint %q is not key[=value]:Effect", part)
		}
		k, val, _ := strings.Cut(kv, "=")
		*f.l = append(*f.l, v1.Taint{Key: k, Value: val, Effect: v1.TaintEffect(effect)})
	}
	return nil
}

// Append adds taints, as Set.
func (f taintsFlag) Append(v string) error { return f.Set(v) }

// Replace sets the taints to vs.
func (f taintsFlag) Replace(vs []string) error {
	*f.l = nil
	for _, v := range vs {
		if err := f.Set(v); err != nil {
			return err
		}
	}
	return nil
}
