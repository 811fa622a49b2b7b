// Package preload puts images on an air-gapped device from files: it
// imports the image archives (internal/imagearchive) of the preload
// directory (--image-preload-dir, <root-dir>/images by default) into the
// runtime at start and whenever one is added, pulls the images of its
// `*.txt` lists at start and when a list changes (CRI PullImage, with the
// node's credentials), keeps the names of what they put there for image
// GC and pins them (see docs/air-gapped.md).
//
// A file is read when it is complete: at start, every file there; then
// on inotify's IN_CLOSE_WRITE (its writer closed it) or IN_MOVED_TO (it
// was renamed into the directory). Dotfiles are ignored, so the safe way
// to add an archive is to write it as .NAME and rename it to NAME, as
// with k3s's agent/images. A file berth must not trust (not a regular
// file, not owned by root, writable by group or others) is refused:
// whoever writes there chooses what the pods of the image run.
//
// The CRI has no import call. The importer for containerd (Containerd)
// speaks containerd's own gRPC API on the CRI socket with the small
// github.com/containerd/containerd/api module only: content writes under
// a lease, with the labels containerd's GC follows
// (containerd.io/gc.ref.content.*, containerd.io/uncompressed), then the
// images in the CRI plugin's namespace (k8s.io) labelled
// io.cri-containerd.image=managed and pinned
// (io.cri-containerd.pinned=pinned, which containerd 1.7 and 2.x report
// as ImageStatus's pinned; 1.6 ignores it). The CRI plugin sees them
// through containerd's image events, as it sees `ctr images import`, and
// unpacks their layers into its snapshotter when a container is first
// created from them (its WithNewSnapshot unpacks a missing snapshot, in
// 1.6 as in 2.x), so berth needs neither the diff nor the snapshot
// service. The full containerd client's Import would cost the binary
// several megabytes more; serving the archive as a registry on loopback
// would need the runtime's mirror configuration changed. CRI-O
// (containers/storage) has no importer yet: its archives are refused
// with an event saying so; lists are pulled on any runtime.
//
// A bad archive is refused with an event naming the file
// (PreloadFailed, on the object image-preload of `berth events`), a log
// line and berth_image_preload_total{result="refused"}; it changes
// nothing in the runtime and holds nothing else up. While files wait,
// Pending lets a pod whose image is missing wait for them rather than
// fail its pull.
//
// It must never import the desired-state packages nor the agent. The
// goroutine of Run owns what was processed; a mutex guards the queue and
// the names of the images, which the pods waiting for an import and
// image GC read.
package preload
