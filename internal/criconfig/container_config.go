package criconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podpath"
	"github.com/berth-agent/berth/internal/podresources"
)

// ContainerConfig is the CRI config of the container's start number
// restartCount (0 for the first), for a pod whose sandbox has podIPs, running
// the resolved image imageRef.
//
// It also prepares what the container's mounts need on the host (see
// containerMounts) and the container's log directory. Every error names
// what in the manifest is wrong (the runtime manager reports it as
// CreateContainerConfigError). ctx bounds the one runtime call it may
// make: reading the image's user when runAsNonRoot must be verified.
func (b *Builder) ContainerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int, podIPs []string, imageRef string) (*runtimeapi.ContainerConfig, error) {
	facts, err := b.nodeFacts()
	if err != nil {
		return nil, err
	}
	if pod.Spec.HostNetwork && len(podIPs) == 0 && b.opts.HostIP != "" {
		// A host-network pod's IP is the node's, for the downward API too.
		podIPs = []string{b.opts.HostIP}
	}
	sec := mergeSecurity(pod, c)
	if err := b.verifyRunAsNonRoot(ctx, c, imageRef, sec); err != nil {
		return nil, err
	}
	env, err := podenv.Resolve(podenv.Context{Pod: pod, Container: c, PodIPs: podIPs, HostIP: b.opts.HostIP, Allocatable: facts.Allocatable, Objects: b.Objects(pod.UID),
		FileKey: func(ref *v1.FileKeySelector) (string, bool, error) { return b.vols.FileKeyValue(pod, ref) }})
	if err != nil {
		return nil, err
	}
	lookup := podenv.Lookup(env)
	mounts, err := b.containerMounts(pod, c, env, podIPs, sec.privileged)
	if err != nil {
		return nil, err
	}
	if b.opts.ResolveImageMounts != nil {
		if err := b.opts.ResolveImageMounts(ctx, mounts); err != nil {
			return nil, err
		}
	}
	sc, err := b.containerSecurityContext(pod, c, sec)
	if err != nil {
		return nil, err
	}
	if err := b.applyUserns(pod, sc.NamespaceOptions); err != nil {
		return nil, err
	}
	annotations, err := containerAnnotations(pod, c, restartCount)
	if err != nil {
		return nil, err
	}
	if ids := imageVolumeIDs(mounts); ids != "" {
		annotations[AnnotationImageVolumes] = ids
	}
	resources := podresources.Linux(c.Resources)
	resources.OomScoreAdj = podresources.OOMScoreAdj(pod, c, facts)

	// The runtime joins LogPath to the sandbox's log directory: the
	// container's name must not lead it anywhere else.
	if err := podpath.Elem(c.Name); err != nil {
		return nil, fmt.Errorf("log path of container %q: %w", c.Name, err)
	}
	logPath := filepath.Join(c.Name, strconv.Itoa(restartCount)+".log")
	if err := b.ensureContainerLogDir(pod, c.Name); err != nil {
		return nil, err
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     expandAll(c.Command, lookup),
		Args:        expandAll(c.Args, lookup),
		WorkingDir:  c.WorkingDir,
		Mounts:      mounts,
		Labels:      containerLabels(pod, c),
		Annotations: annotations,
		LogPath:     logPath,
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux:       &runtimeapi.LinuxContainerConfig{Resources: resources, SecurityContext: sc},
	}
	if c.Lifecycle != nil {
		cfg.StopSignal = criStopSignal(c.Lifecycle.StopSignal)
	}
	for _, e := range env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	return cfg, nil
}

// ensureContainerLogDir creates the container's directory in the pod's
// log directory, where the runtime writes LogPath, as the kubelet does:
// containerd creates it itself, CRI-O's conmon does not and fails the
// container. It never goes through a symbolic link.
func (b *Builder) ensureContainerLogDir(pod *v1.Pod, name string) error {
	logDir, err := b.podLogDir(pod)
	if err != nil {
		return err
	}
	dir, err := podpath.Within(logDir, name)
	if err != nil {
		return fmt.Errorf("log directory of container %q: %w", name, err)
	}
	if err := podpath.MkdirAll(b.opts.PodLogsDir, dir, 0o755); err != nil {
		return fmt.Errorf("create the log directory of container %q: %w", name, err)
	}
	return nil
}

// expandAll expands $(VAR) references in each of args.
func expandAll(args []string, lookup func(string) (string, bool)) []string {
	if args == nil {
		return nil
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = podenv.Expand(a, lookup)
	}
	return out
}

// containerLabels are the kubelet's identity labels plus berth's ownership
// label; a container carries no user labels (those are on the sandbox).
func containerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
		LabelManaged:       "true",
	}
}

// containerAnnotations record what a later berth (or the status reader) needs
// without the manifest: the spec hash for adoption, the image as written, the
// restart count, the termination-message settings, ports, grace periods,
// the preStop hook and the stop signal.
func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int) (map[string]string, error) {
	grace := strconv.FormatInt(gracePeriod(pod), 10)
	ann := map[string]string{
		AnnotationContainerHash:            strconv.FormatUint(HashContainer(c), 16),
		AnnotationContainerImage:           c.Image,
		AnnotationContainerRestartCount:    strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
		AnnotationPodGracePeriod:           grace,
		AnnotationContainerGracePeriod:     grace,
	}
	if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
		ann[AnnotationStopSignal] = string(*c.Lifecycle.StopSignal)
	}
	if len(c.Ports) > 0 {
		b, err := json.Marshal(c.Ports)
		if err != nil {
			return nil, fmt.Errorf("record ports: %w", err)
		}
		ann[AnnotationContainerPorts] = string(b)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		b, err := json.Marshal(c.Lifecycle.PreStop)
		if err != nil {
			return nil, fmt.Errorf("record preStop hook: %w", err)
		}
		ann[AnnotationPreStopHook] = string(b)
	}
	return ann, nil
}

// NextLogIndex is the restart count a container without a status starts
// at: one past the highest <n>.log its log directory already holds, so a
// berth that lost the runtime's state never overwrites a log.
func (b *Builder) NextLogIndex(pod *v1.Pod, name string) int {
	logDir, err := b.podLogDir(pod)
	if err != nil {
		return 0
	}
	dir, err := podpath.Within(logDir, name)
	if err != nil {
		return 0
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	next := 0
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log"))
		if err == nil && strings.HasSuffix(e.Name(), ".log") && n+1 > next {
			next = n + 1
		}
	}
	return next
}
