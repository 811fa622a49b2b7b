// Package images is how berth gets a container's image on the CRI image
// service: the pull policy and whether an image must be pulled, the
// credentials to pull it with (the pod's image pull Secrets, then the
// node's credentials file, matched by pullauth's keyring, then the
// kubelet's image credential provider plugins: run bounded, their
// answers parsed strictly and cached), the pull itself with each
// credential in turn, the runtime's ID of an image, and image volume
// mounts pinned to that ID.
//
// It must never import the runtime manager, the desired-state packages
// (manifests, sources, the merge store) nor the agent: the pod arrives as
// a *v1.Pod, its Secrets through Options.Objects, the plugins' config
// (read and checked by internal/config) through Options. What a failed
// pull means for a pod (its events, its waiting reason, the pull
// back-off) is the runtime manager's.
//
// A Puller reads the node's credentials file at every pull, and the image
// service guards itself. Its one mutable state is each credential
// provider plugin's cache, owned and guarded by that plugin
// (credentialPlugin.mu); concurrent runs of a plugin for one image are
// coalesced by its singleflight group.
package images
