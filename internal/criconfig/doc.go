// Package criconfig is the pod-to-CRI translation: it turns a pod into the
// CRI sandbox config (identity, DNS, hostname, ports, sysctls, security,
// user namespaces) and container configs (command and env, mounts and
// image volumes, subPaths, security context, resources, stop signal,
// labels and annotations). What those configs name on the host (the pod's
// directories, emptyDirs, configMap and secret volumes, subPath bind
// mounts, /etc/hosts, termination-message files, user-namespace ranges)
// its Builder has package volumes make. It owns the labels and
// annotations berth writes on runtime objects.
//
// It must never import the runtime manager (kuberuntime, which imports
// it), the agent or the desired-state packages; it asks the runtime
// nothing but an image's user, through the image service it is given.
//
// A Builder owns its mutable state (the machine's figures, probed once,
// and the volumes.Host it made, which guards its own), each guarded where
// it is kept; the runtime manager serializes work per pod UID.
package criconfig
