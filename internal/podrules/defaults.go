package podrules

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Values the API server would fill in; kept as berth's own copy of
// k8s.io/kubernetes/pkg/apis/core/v1/defaults.go for the fields a static
// pod uses.
const (
	defaultTerminationGracePeriod = int64(30)
	defaultSchedulerName          = "default-scheduler"
	defaultTerminationMessagePath = "/dev/termination-log"
	defaultFileMode               = int32(0o644)
)

// Priorities the API server's priority admission gives the built-in
// classes; static control-plane pods use them.
var systemPriorities = map[string]int32{
	"system-node-critical":    2000001000,
	"system-cluster-critical": 2000000000,
}

// Default fills every field the API server would have defaulted, so the
// agent and `berth validate -o yaml` see the pod a kubelet user expects. It
// also clears status, which a manifest cannot set.
func Default(pod *v1.Pod) {
	pod.Status = v1.PodStatus{}
	spec := &pod.Spec
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr(defaultTerminationGracePeriod)
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = defaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr(v1.DefaultEnableServiceLinks)
	}
	if spec.Priority == nil {
		spec.Priority = ptr(systemPriorities[spec.PriorityClassName])
	}
	if spec.PreemptionPolicy == nil {
		spec.PreemptionPolicy = ptr(v1.PreemptLowerPriority)
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i], spec.HostNetwork)
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i], spec.HostNetwork)
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	if spec.Resources != nil {
		defaultRequestsFromLimits(spec.Resources)
	}
}

// defaultContainer applies SetDefaults_Container and what hangs below it.
func defaultContainer(c *v1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = defaultTerminationMessagePath
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		// With the host's network the container port is the host port.
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	defaultRequestsFromLimits(&c.Resources)
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*v1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultPullPolicy is Always for an untagged or :latest image (it may move),
// IfNotPresent for a tag or a digest.
func defaultPullPolicy(image string) v1.PullPolicy {
	if strings.Contains(image, "@") {
		return v1.PullIfNotPresent
	}
	name := image
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	tag := ""
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		tag = name[i+1:]
	}
	if tag == "" || tag == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// defaultRequestsFromLimits copies each limit without a request into the
// requests, as the API server does, so QoS and cgroups match a kubelet's.
func defaultRequestsFromLimits(r *v1.ResourceRequirements) {
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = v1.ResourceList{}
		}
		r.Requests[name] = limit.DeepCopy()
	}
}

func defaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr("")
	}
}

func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

// defaultVolume gives a volume without a source an emptyDir, and fills the
// modes and types of the sources berth supports.
func defaultVolume(v *v1.Volume) {
	if v.VolumeSource == (v1.VolumeSource{}) {
		v.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	if v.Image != nil {
		defaultImageVolume(v.Image)
	}
	if v.HostPath != nil && v.HostPath.Type == nil {
		v.HostPath.Type = ptr(v1.HostPathUnset)
	}
	if cm := v.ConfigMap; cm != nil && cm.DefaultMode == nil {
		cm.DefaultMode = ptr(defaultFileMode)
	}
	if s := v.Secret; s != nil && s.DefaultMode == nil {
		s.DefaultMode = ptr(defaultFileMode)
	}
	if d := v.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = ptr(defaultFileMode)
		}
		for i := range d.Items {
			if f := d.Items[i].FieldRef; f != nil && f.APIVersion == "" {
				f.APIVersion = "v1"
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
