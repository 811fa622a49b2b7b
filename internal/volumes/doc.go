// Package volumes makes a pod's volumes on the host and removes them: the
// pod's state directory and its layout, emptyDirs (tmpfs for medium
// Memory), hostPath type checks, configMap and secret volumes written
// atomically and kept up to date, subPaths opened safely and bind-mounted,
// the managed /etc/hosts, termination-message files, env files read for
// fileKeyRef, and the pods' user-namespace ID ranges. Everything it makes
// lives under RootDir/pods/<uid>, through paths package podpath checks.
//
// It must never import the pod-to-CRI translation (criconfig, which
// imports it), the runtime manager, the agent or the desired-state
// packages; it makes no CRI call.
//
// A Host owns its mutable state (the user-namespace allocator, which
// guards itself); the runtime manager serializes work per pod UID.
package volumes
