package podrules

import (
	"fmt"
	"path"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	restartPolicies     = sets.New(string(v1.RestartPolicyAlways), string(v1.RestartPolicyOnFailure), string(v1.RestartPolicyNever))
	dnsPolicies         = sets.New(string(v1.DNSClusterFirst), string(v1.DNSClusterFirstWithHostNet), string(v1.DNSDefault), string(v1.DNSNone))
	pullPolicies        = sets.New(string(v1.PullAlways), string(v1.PullIfNotPresent), string(v1.PullNever))
	protocols           = sets.New(string(v1.ProtocolTCP), string(v1.ProtocolUDP), string(v1.ProtocolSCTP))
	terminationPolicies = sets.New(string(v1.TerminationMessageReadFile), string(v1.TerminationMessageFallbackToLogsOnError))
	uriSchemes          = sets.New(string(v1.URISchemeHTTP), string(v1.URISchemeHTTPS))
	storageMedia        = sets.New(string(v1.StorageMediumDefault), string(v1.StorageMediumMemory), string(v1.StorageMediumHugePages))
	mountPropagations   = sets.New(string(v1.MountPropagationNone), string(v1.MountPropagationHostToContainer), string(v1.MountPropagationBidirectional))
	hostPathTypes       = sets.New(string(v1.HostPathUnset), string(v1.HostPathDirectoryOrCreate), string(v1.HostPathDirectory),
		string(v1.HostPathFileOrCreate), string(v1.HostPathFile), string(v1.HostPathSocket), string(v1.HostPathCharDev), string(v1.HostPathBlockDev))
	// envFieldPaths are the downward-API fields the kubelet resolves for
	// environment variables without an API server.
	envFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
		"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
)

// Validate checks a defaulted pod the way the API server would, so a pod
// berth accepts is one a cluster would accept too. Paths are relative to the
// pod, as in its manifest.
func Validate(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if pod.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), ""))
	}
	for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
		errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg+" (the name carries the node name as suffix)"))
	}
	for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
	}
	errs = append(errs, validateUID(string(pod.UID), meta.Child("uid"))...)
	errs = append(errs, metav1validation.ValidateLabels(pod.Labels, meta.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(pod.Annotations, meta.Child("annotations"))...)
	errs = append(errs, validateRollbackAfter(pod, meta.Child("annotations"))...)
	errs = append(errs, validateBerthAnnotations(pod.Annotations, meta.Child("annotations"))...)
	errs = append(errs, validateSpec(&pod.Spec, field.NewPath("spec"))...)
	return append(errs, validatePriority(&pod.Spec, field.NewPath("spec"))...)
}

func validateSpec(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := sets.New[string]()
	for i, v := range spec.Volumes {
		vp := p.Child("volumes").Index(i)
		errs = append(errs, validateDNSLabel(v.Name, vp.Child("name"))...)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
		errs = append(errs, validateVolumeSource(&v.VolumeSource, vp)...)
	}
	errs = append(errs, validateObjectRefs(spec, p)...)
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), "a pod needs at least one container"))
	}
	names := sets.New[string]()
	for i, c := range spec.EphemeralContainers {
		errs = append(errs, validateDNSLabel(c.Name, p.Child("ephemeralContainers").Index(i).Child("name"))...)
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		cp := p.Child("initContainers").Index(i)
		errs = append(errs, validateContainer(c, cp, spec, volumes, names)...)
		errs = append(errs, validateInitContainerRestart(c, cp)...)
		isSidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		if !isSidecar {
			for _, probe := range probesOf(c) {
				if probe.probe != nil {
					errs = append(errs, field.Forbidden(cp.Child(probe.name), "only sidecar init containers (restartPolicy: Always) may have probes"))
				}
			}
			if c.Lifecycle != nil {
				errs = append(errs, field.Forbidden(cp.Child("lifecycle"), "only sidecar init containers (restartPolicy: Always) may have lifecycle hooks"))
			}
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		cp := p.Child("containers").Index(i)
		errs = append(errs, validateContainer(c, cp, spec, volumes, names)...)
		errs = append(errs, validateContainerRestart(c, cp)...)
	}
	if !restartPolicies.Has(string(spec.RestartPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), spec.RestartPolicy, sets.List(restartPolicies)))
	}
	if !dnsPolicies.Has(string(spec.DNSPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("dnsPolicy"), spec.DNSPolicy, sets.List(dnsPolicies)))
	}
	if spec.DNSPolicy == v1.DNSNone && (spec.DNSConfig == nil || len(spec.DNSConfig.Nameservers) == 0) {
		errs = append(errs, field.Required(p.Child("dnsConfig", "nameservers"), "dnsPolicy None needs at least one nameserver"))
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *d, "must be > 0"))
	}
	if spec.Hostname != "" {
		errs = append(errs, validateDNSLabel(spec.Hostname, p.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, validateDNSLabel(spec.Subdomain, p.Child("subdomain"))...)
	}
	for i, ha := range spec.HostAliases {
		errs = append(errs, validation.IsValidIP(p.Child("hostAliases").Index(i).Child("ip"), ha.IP)...)
	}
	if sc := spec.SecurityContext; sc != nil {
		errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, p.Child("securityContext"))...)
	}
	errs = append(errs, validateHostPorts(spec, p)...)
	errs = append(errs, validateFileKeyRefs(spec, p)...)
	errs = append(errs, validateHostUsers(spec, p)...)
	return errs
}

// validateContainer checks one container; names collects container names
// across init and app containers, which must all differ.
func validateContainer(c *v1.Container, p *field.Path, spec *v1.PodSpec, volumes, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, validateDNSLabel(c.Name, p.Child("name"))...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		names.Insert(c.Name)
	}
	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, field.Required(p.Child("image"), "every container needs an image"))
	} else if c.Image != strings.TrimSpace(c.Image) {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	if !pullPolicies.Has(string(c.ImagePullPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(pullPolicies)))
	}
	if !terminationPolicies.Has(string(c.TerminationMessagePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, sets.List(terminationPolicies)))
	}
	errs = append(errs, validatePorts(c.Ports, p.Child("ports"), spec.HostNetwork)...)
	errs = append(errs, validateEnv(c.Env, p.Child("env"))...)
	errs = append(errs, validateResources(&c.Resources, p.Child("resources"))...)
	errs = append(errs, validateMounts(c.VolumeMounts, p.Child("volumeMounts"), volumes)...)
	for _, pr := range probesOf(c) {
		if pr.probe == nil {
			continue
		}
		errs = append(errs, validateProbe(pr.probe, p.Child(pr.name), c.Ports)...)
		if pr.name != "readinessProbe" && pr.probe.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(p.Child(pr.name, "successThreshold"), pr.probe.SuccessThreshold, "must be 1"))
		}
	}
	if c.Lifecycle != nil {
		if h := c.Lifecycle.PostStart; h != nil {
			errs = append(errs, validateLifecycleHandler(h, p.Child("lifecycle", "postStart"), c.Ports, spec.TerminationGracePeriodSeconds)...)
		}
		if h := c.Lifecycle.PreStop; h != nil {
			errs = append(errs, validateLifecycleHandler(h, p.Child("lifecycle", "preStop"), c.Ports, spec.TerminationGracePeriodSeconds)...)
		}
		if sig := c.Lifecycle.StopSignal; sig != nil {
			errs = append(errs, validateStopSignal(*sig, p.Child("lifecycle", "stopSignal"), spec.OS)...)
		}
	}
	if sc := c.SecurityContext; sc != nil {
		errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, p.Child("securityContext"))...)
	}
	return errs
}

// namedProbe is one of a container's probes with its field name, in the
// order of the API so problems come out in a stable order.
type namedProbe struct {
	name  string
	probe *v1.Probe
}

func probesOf(c *v1.Container) []namedProbe {
	return []namedProbe{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}}
}

func validatePorts(ports []v1.ContainerPort, p *field.Path, hostNetwork bool) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		pp := p.Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(pp.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		if hostNetwork && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, "must equal containerPort when hostNetwork is true"))
		}
		if !protocols.Has(string(port.Protocol)) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, sets.List(protocols)))
		}
	}
	return errs
}

func validateEnv(env []v1.EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range env {
		ep := p.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		}
		for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
			errs = append(errs, field.Invalid(ep.Child("name"), ev.Name, msg))
		}
		vf := ev.ValueFrom
		if vf == nil {
			continue
		}
		if ev.Value != "" {
			errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "may not be set when value is"))
		}
		n := 0
		for _, set := range []bool{vf.FieldRef != nil, vf.ResourceFieldRef != nil, vf.ConfigMapKeyRef != nil, vf.SecretKeyRef != nil, vf.FileKeyRef != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "must have exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef, fileKeyRef"))
		}
		if f := vf.FieldRef; f != nil {
			errs = append(errs, validateFieldRef(f, ep.Child("valueFrom", "fieldRef"), envFieldPaths)...)
		}
		if r := vf.ResourceFieldRef; r != nil && r.Resource == "" {
			errs = append(errs, field.Required(ep.Child("valueFrom", "resourceFieldRef", "resource"), ""))
		}
	}
	return errs
}

// validateFieldRef accepts the plain paths in allowed, and the
// metadata.labels['key'] / metadata.annotations['key'] forms.
func validateFieldRef(f *v1.ObjectFieldSelector, p *field.Path, allowed sets.Set[string]) field.ErrorList {
	if f.APIVersion != "v1" {
		return field.ErrorList{field.NotSupported(p.Child("apiVersion"), f.APIVersion, []string{"v1"})}
	}
	fp := f.FieldPath
	if base, _, ok := strings.Cut(fp, "['"); ok && strings.HasSuffix(fp, "']") && (base == "metadata.labels" || base == "metadata.annotations") {
		return nil
	}
	if !allowed.Has(fp) {
		return field.ErrorList{field.NotSupported(p.Child("fieldPath"), fp, sets.List(allowed))}
	}
	return nil
}

func validateResources(r *v1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, kind := range []struct {
		name string
		list v1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for name, q := range kind.list {
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p.Child(kind.name).Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	for name, req := range r.Requests {
		if limit, ok := r.Limits[name]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func validateMounts(mounts []v1.VolumeMount, p *field.Path, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		mp := p.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		} else {
			clean := path.Clean(m.MountPath)
			if paths.Has(clean) {
				errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
			}
			paths.Insert(clean)
		}
		if m.SubPath != "" && (path.IsAbs(m.SubPath) || strings.HasPrefix(path.Clean(m.SubPath), "..")) {
			errs = append(errs, field.Invalid(mp.Child("subPath"), m.SubPath, "must be a relative path not reaching out of the volume"))
		}
		if m.MountPropagation != nil && !mountPropagations.Has(string(*m.MountPropagation)) {
			errs = append(errs, field.NotSupported(mp.Child("mountPropagation"), *m.MountPropagation, sets.List(mountPropagations)))
		}
	}
	return errs
}

func validateProbe(probe *v1.Probe, p *field.Path, ports []v1.ContainerPort) field.ErrorList {
	h := probe.ProbeHandler
	errs := validateHandler(p, ports, h.Exec, h.HTTPGet, h.TCPSocket, h.GRPC, nil)
	for _, f := range []struct {
		name string
		v    int32
		min  int32
	}{
		{"initialDelaySeconds", probe.InitialDelaySeconds, 0},
		{"timeoutSeconds", probe.TimeoutSeconds, 1},
		{"periodSeconds", probe.PeriodSeconds, 1},
		{"successThreshold", probe.SuccessThreshold, 1},
		{"failureThreshold", probe.FailureThreshold, 1},
	} {
		if f.v < f.min {
			errs = append(errs, field.Invalid(p.Child(f.name), f.v, fmt.Sprintf("must be >= %d", f.min)))
		}
	}
	if g := probe.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be > 0"))
	}
	return errs
}

// validateLifecycleHandler checks a postStart or preStop hook. A sleep
// action may last from 0 seconds (KEP-4818: a zero sleep, GA in 1.34) to
// the pod's terminationGracePeriodSeconds (KEP-3960), with the API server's
// message; grace is nil only when the pod's own is invalid, which is
// reported already.
func validateLifecycleHandler(h *v1.LifecycleHandler, p *field.Path, ports []v1.ContainerPort, grace *int64) field.ErrorList {
	errs := validateHandler(p, ports, h.Exec, h.HTTPGet, h.TCPSocket, nil, h.Sleep)
	if h.Sleep != nil && grace != nil && (h.Sleep.Seconds < 0 || h.Sleep.Seconds > *grace) {
		errs = append(errs, field.Invalid(p.Child("sleep"), h.Sleep.Seconds,
			fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *grace)))
	}
	return errs
}

// validateHandler checks that exactly one action is set and that it is
// complete; grpc and sleep are nil where the handler type lacks them.
func validateHandler(p *field.Path, ports []v1.ContainerPort, exec *v1.ExecAction, httpGet *v1.HTTPGetAction, tcp *v1.TCPSocketAction, grpc *v1.GRPCAction, sleep *v1.SleepAction) field.ErrorList {
	var errs field.ErrorList
	var set []string
	if exec != nil {
		set = append(set, "exec")
		if len(exec.Command) == 0 {
			errs = append(errs, field.Required(p.Child("exec", "command"), ""))
		}
	}
	if httpGet != nil {
		set = append(set, "httpGet")
		errs = append(errs, validatePortRef(httpGet.Port, p.Child("httpGet", "port"), ports)...)
		if !uriSchemes.Has(string(httpGet.Scheme)) {
			errs = append(errs, field.NotSupported(p.Child("httpGet", "scheme"), httpGet.Scheme, sets.List(uriSchemes)))
		}
		for i, hdr := range httpGet.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
				errs = append(errs, field.Invalid(p.Child("httpGet", "httpHeaders").Index(i).Child("name"), hdr.Name, msg))
			}
		}
	}
	if tcp != nil {
		set = append(set, "tcpSocket")
		errs = append(errs, validatePortRef(tcp.Port, p.Child("tcpSocket", "port"), ports)...)
	}
	if grpc != nil {
		set = append(set, "grpc")
		for _, msg := range validation.IsValidPortNum(int(grpc.Port)) {
			errs = append(errs, field.Invalid(p.Child("grpc", "port"), grpc.Port, msg))
		}
	}
	if sleep != nil {
		set = append(set, "sleep")
	}
	switch {
	case len(set) == 0:
		errs = append(errs, field.Required(p, "must specify a handler type (exec, httpGet, tcpSocket, grpc or sleep)"))
	case len(set) > 1:
		errs = append(errs, field.Forbidden(p.Child(set[1]), "may not specify more than one handler type, found "+strings.Join(set, " and ")))
	}
	return errs
}

// validatePortRef accepts a port number or the name of one of the
// container's ports.
func validatePortRef(port intstr.IntOrString, p *field.Path, ports []v1.ContainerPort) field.ErrorList {
	if port.Type == intstr.Int {
		var errs field.ErrorList
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(p, port.IntValue(), msg))
		}
		return errs
	}
	for _, cp := range ports {
		if cp.Name == port.StrVal {
			return nil
		}
	}
	if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, port.StrVal, strings.Join(msgs, "; "))}
	}
	return field.ErrorList{field.Invalid(p, port.StrVal, "names no port of this container")}
}

// validateVolumeSource checks that exactly one source is set and that the
// sources berth supports are complete. Whether berth can honour a source
// at all is CheckStandalone's business.
func validateVolumeSource(vs *v1.VolumeSource, p *field.Path) field.ErrorList {
	set := volumeSourceNames(vs)
	switch {
	case len(set) == 0:
		return field.ErrorList{field.Required(p, "must specify a volume type")}
	case len(set) > 1:
		return field.ErrorList{field.Forbidden(p.Child(set[1]), "may not specify more than one volume type, found "+strings.Join(set, " and "))}
	}
	var errs field.ErrorList
	if hp := vs.HostPath; hp != nil {
		if hp.Path == "" {
			errs = append(errs, field.Required(p.Child("hostPath", "path"), ""))
		} else if !path.IsAbs(hp.Path) {
			errs = append(errs, field.Invalid(p.Child("hostPath", "path"), hp.Path, "must be an absolute path"))
		}
		if hp.Type != nil && !hostPathTypes.Has(string(*hp.Type)) {
			errs = append(errs, field.NotSupported(p.Child("hostPath", "type"), *hp.Type, sets.List(hostPathTypes)))
		}
	}
	if iv := vs.Image; iv != nil {
		errs = append(errs, validateImageVolume(iv, p.Child("image"))...)
	}
	if ed := vs.EmptyDir; ed != nil {
		m := string(ed.Medium)
		if !storageMedia.Has(m) && !strings.HasPrefix(m, string(v1.StorageMediumHugePagesPrefix)) {
			errs = append(errs, field.NotSupported(p.Child("emptyDir", "medium"), ed.Medium, sets.List(storageMedia)))
		}
		if ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("emptyDir", "sizeLimit"), ed.SizeLimit.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

// volumeSourceNames lists the JSON names of the set sources of a volume.
func volumeSourceNames(vs *v1.VolumeSource) []string {
	var names []string
	v := reflect.ValueOf(vs).Elem()
	for i := range v.NumField() {
		if !v.Field(i).IsNil() {
			tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			names = append(names, tag)
		}
	}
	return names
}

func validateIDs(user, group *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(p.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(p.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

// maxUIDLength bounds metadata.uid: a UUID has 36 characters, berth's
// content hash 32, a SHA-256 in hex 64; 128 leaves room for any real one.
const maxUIDLength = 128

// validateUID bounds metadata.uid to a character set that is safe as one
// path element and in log lines. The API server never checks a UID's shape
// because it makes them itself (UUIDs); a static pod's UID comes from the
// manifest, and berth names the pod's state and log directories after it,
// so "../../victim" or a newline must never get that far. Letters, digits,
// '-' and '.' (not first, so never "." or "..") accept every UUID, berth's
// and the kubelet's hex hashes and any sensible hand-written name. '_' is
// out: it separates namespace, name and UID in the log directory's name
// (<namespace>_<name>_<uid>), and berth finds a UID's log directory by it.
func validateUID(uid string, p *field.Path) field.ErrorList {
	switch {
	case uid == "":
		return field.ErrorList{field.Required(p, "")}
	case len(uid) > maxUIDLength:
		return field.ErrorList{field.TooLong(p, "", maxUIDLength)}
	}
	for i, r := range uid {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || (r != '-' && r != '.')) {
			return field.ErrorList{field.Invalid(p, uid, "must consist of letters, digits, '-' or '.', and start with a letter or a digit")}
		}
	}
	return nil
}

func validateDNSLabel(v string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}
