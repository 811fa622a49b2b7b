package criconfig

import (
	"context"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's default masked and read-only /proc and /sys paths, applied
// to every unprivileged container whose procMount is Default.
var (
	defaultMaskedPaths = []string{
		"/proc/asound",
		"/proc/acpi",
		"/proc/interrupts",
		"/proc/kcore",
		"/proc/keys",
		"/proc/latency_stats",
		"/proc/timer_list",
		"/proc/timer_stats",
		"/proc/sched_debug",
		"/proc/scsi",
		"/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{
		"/proc/bus",
		"/proc/fs",
		"/proc/irq",
		"/proc/sys",
		"/proc/sysrq-trigger",
	}
)

// namespaceOptions maps hostNetwork, hostPID, hostIPC and
// shareProcessNamespace onto CRI namespace modes, the same for the sandbox
// and its containers.
func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// effectiveSecurity is a container's security settings after the pod's
// securityContext has filled what the container's leaves unset.
type effectiveSecurity struct {
	runAsUser    *int64
	runAsGroup   *int64
	runAsNonRoot bool
	seLinux      *v1.SELinuxOptions
	seccomp      *v1.SeccompProfile
	privileged   bool
}

// mergeSecurity overlays the container's securityContext on the pod's, field
// by field, as the kubelet does.
func mergeSecurity(pod *v1.Pod, c *v1.Container) effectiveSecurity {
	var e effectiveSecurity
	if p := pod.Spec.SecurityContext; p != nil {
		e.runAsUser, e.runAsGroup = p.RunAsUser, p.RunAsGroup
		e.runAsNonRoot = p.RunAsNonRoot != nil && *p.RunAsNonRoot
		e.seLinux, e.seccomp = p.SELinuxOptions, p.SeccompProfile
	}
	if s := c.SecurityContext; s != nil {
		if s.RunAsUser != nil {
			e.runAsUser = s.RunAsUser
		}
		if s.RunAsGroup != nil {
			e.runAsGroup = s.RunAsGroup
		}
		if s.RunAsNonRoot != nil {
			e.runAsNonRoot = *s.RunAsNonRoot
		}
		if s.SELinuxOptions != nil {
			e.seLinux = s.SELinuxOptions
		}
		if s.SeccompProfile != nil {
			e.seccomp = s.SeccompProfile
		}
		e.privileged = s.Privileged != nil && *s.Privileged
	}
	return e
}

// seccompProfile maps a seccomp profile to CRI. Unset is Unconfined, the
// kubelet's default without SeccompDefault; Localhost profiles are files
// under RootDir/seccomp, where the kubelet keeps them under its root dir.
func (b *Builder) seccompProfile(p *v1.SeccompProfile) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, fmt.Errorf("seccompProfile type Localhost needs localhostProfile")
		}
		return &runtimeapi.SecurityProfile{
			ProfileType:  runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(b.opts.RootDir, "seccomp", *p.LocalhostProfile),
		}, nil
	}
	return nil, fmt.Errorf("unknown seccompProfile type %q", p.Type)
}

// seLinuxOptions maps SELinux options to CRI; nil stays nil (runtime default).
func seLinuxOptions(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// supplementalGroups is the pod's supplementalGroups followed by its
// fsGroup, which the kubelet adds so every container can use volumes handed
// to that group.
func supplementalGroups(pod *v1.Pod) []int64 {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return nil
	}
	groups := append([]int64(nil), sc.SupplementalGroups...)
	if sc.FSGroup != nil {
		groups = append(groups, *sc.FSGroup)
	}
	return groups
}

// containerSecurityContext is the container's Linux security context.
func (b *Builder) containerSecurityContext(pod *v1.Pod, c *v1.Container, e effectiveSecurity) (*runtimeapi.LinuxContainerSecurityContext, error) {
	seccomp, err := b.seccompProfile(e.seccomp)
	if err != nil {
		return nil, err
	}
	sc := &runtimeapi.LinuxContainerSecurityContext{
		Privileged:         e.privileged,
		NamespaceOptions:   namespaceOptions(pod),
		SelinuxOptions:     seLinuxOptions(e.seLinux),
		SupplementalGroups: supplementalGroups(pod),
		Seccomp:            seccomp,
	}
	if e.runAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *e.runAsUser}
	}
	if e.runAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *e.runAsGroup}
	}
	s := c.SecurityContext
	if s != nil {
		if caps := s.Capabilities; caps != nil {
			sc.Capabilities = &runtimeapi.Capability{}
			for _, a := range caps.Add {
				sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
			}
			for _, d := range caps.Drop {
				sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
			}
		}
		sc.ReadonlyRootfs = s.ReadOnlyRootFilesystem != nil && *s.ReadOnlyRootFilesystem
		sc.NoNewPrivs = s.AllowPrivilegeEscalation != nil && !*s.AllowPrivilegeEscalation
		if sc.NoNewPrivs && (e.privileged || (s.Capabilities != nil && containsCap(s.Capabilities.Add, "SYS_ADMIN"))) {
			return nil, fmt.Errorf("allowPrivilegeEscalation false cannot be combined with privileged or CAP_SYS_ADMIN")
		}
	}
	unmasked := s != nil && s.ProcMount != nil && *s.ProcMount == v1.UnmaskedProcMount
	if !e.privileged && !unmasked {
		sc.MaskedPaths = append([]string(nil), defaultMaskedPaths...)
		sc.ReadonlyPaths = append([]string(nil), defaultReadonlyPaths...)
	} else {
		// Empty but non-nil tells the runtime "none", where nil would mean
		// "your defaults".
		sc.MaskedPaths = []string{}
		sc.ReadonlyPaths = []string{}
	}
	return sc, nil
}

// containsCap reports whether caps holds name, with or without "CAP_".
func containsCap(caps []v1.Capability, name string) bool {
	for _, c := range caps {
		if string(c) == name || string(c) == "CAP_"+name {
			return true
		}
	}
	return false
}

// verifyRunAsNonRoot refuses to start a container whose runAsNonRoot cannot
// hold: an explicit runAsUser 0, or no runAsUser and an image whose user is
// root (or is a name berth cannot check). It asks the runtime for the image
// user only when it has to, so pods without runAsNonRoot cost no extra call.
func (b *Builder) verifyRunAsNonRoot(ctx context.Context, c *v1.Container, imageRef string, e effectiveSecurity) error {
	if !e.runAsNonRoot {
		return nil
	}
	if e.runAsUser != nil {
		if *e.runAsUser == 0 {
			return fmt.Errorf("container %q has runAsNonRoot but runAsUser 0 (root)", c.Name)
		}
		return nil
	}
	resp, err := b.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image}, false)
	if err != nil {
		return fmt.Errorf("container %q has runAsNonRoot: read the user of image %q: %w", c.Name, c.Image, err)
	}
	img := resp.GetImage()
	switch {
	case img == nil:
		return fmt.Errorf("container %q has runAsNonRoot: image %q is not present to read its user from", c.Name, c.Image)
	case img.GetUid() != nil && img.GetUid().GetValue() != 0:
		return nil
	case img.GetUid() == nil && img.GetUsername() != "":
		return fmt.Errorf("container %q has runAsNonRoot and image %q has the non-numeric user %q, which cannot be verified as non-root: set securityContext.runAsUser", c.Name, c.Image, img.GetUsername())
	}
	return fmt.Errorf("container %q has runAsNonRoot and image %q will run as root: set securityContext.runAsUser to a non-zero user", c.Name, c.Image)
}

// sandboxSecurityContext is the sandbox's Linux security context from the
// pod's securityContext. The sandbox is privileged when any container is,
// as the kubelet does, so the runtime allows privileged containers in it.
func (b *Builder) sandboxSecurityContext(pod *v1.Pod) (*runtimeapi.LinuxSandboxSecurityContext, error) {
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions:   namespaceOptions(pod),
		SupplementalGroups: supplementalGroups(pod),
		Privileged:         anyPrivileged(pod),
	}
	var profile *v1.SeccompProfile
	if p := pod.Spec.SecurityContext; p != nil {
		if p.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *p.RunAsUser}
		}
		if p.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *p.RunAsGroup}
		}
		sc.SelinuxOptions = seLinuxOptions(p.SELinuxOptions)
		profile = p.SeccompProfile
	}
	seccomp, err := b.seccompProfile(profile)
	if err != nil {
		return nil, err
	}
	sc.Seccomp = seccomp
	return sc, nil
}

// anyPrivileged reports whether any init or app container is privileged.
func anyPrivileged(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return true
			}
		}
	}
	return false
}

// applyUserns gives ns the pod's user namespace when the pod asks for one
// (hostUsers: false): the sandbox and every container get the same
// mapping. Pods on the host's user namespace are left as they always were.
func (b *Builder) applyUserns(pod *v1.Pod, ns *runtimeapi.NamespaceOption) error {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return nil
	}
	mp, err := b.vols.PodUserns(pod.UID)
	if err != nil {
		return fmt.Errorf("user namespace (hostUsers: false): %w", err)
	}
	ids := []*runtimeapi.IDMapping{{HostId: mp.HostID, ContainerId: 0, Length: mp.Length}}
	ns.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: ids}
	return nil
}
