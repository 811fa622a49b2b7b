package criconfig

// Labels and annotations berth puts on runtime objects. The io.kubernetes.*
// keys are the kubelet's, so crictl, nerdctl and log shippers understand them.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
	// LabelManaged marks ownership: berth never stops or removes an object
	// without it.
	LabelManaged = "io.berth.managed"

	AnnotationContainerHash            = "io.kubernetes.container.hash"
	AnnotationContainerRestartCount    = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationContainerPorts           = "io.kubernetes.container.ports"
	AnnotationPodGracePeriod           = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerGracePeriod     = "io.kubernetes.container.terminationGracePeriod" // not the kubelet's; berth's own
	AnnotationPreStopHook              = "io.kubernetes.container.preStopHandler"
)

// AnnotationContainerImage, when a container carries it, is the image as the
// manifest named it (busybox:1.36). Containers are created from the resolved
// image ID, and containerd (1.6, 1.7 and 2.1 alike) neither echoes
// ImageSpec.UserSpecifiedImage in ContainerStatus nor reports the spec's name
// (it reports docker.io/library/busybox:1.36), so this annotation is the only
// way to give ContainerStatus.Image back exactly as written
// (TestE2EImageNameEcho).
const AnnotationContainerImage = "io.berth.container.image"

// AnnotationStopSignal records a container's lifecycle.stopSignal.
const AnnotationStopSignal = "io.berth.container.stopSignal"
