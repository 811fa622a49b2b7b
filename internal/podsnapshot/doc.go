// Package podsnapshot turns the Results of a source's manifests (package
// podspec) into the Snapshot the source hands to the store: it keeps the
// last good version of a pod whose manifest broke (KeepLastGood), refuses
// duplicate names and UIDs across the source (Assemble), and resolves the
// pods' references to the source's ConfigMaps and Secrets (Resolver),
// giving a pod whose environment comes from them a UID that follows its
// values.
//
// It must never import the sources, the store, the agent or the runtime;
// of berth it imports only podspec. It reads no file and knows nothing
// of CRI.
//
// Its one piece of mutable state is a Resolver's last resolution of each
// pod, which belongs to the goroutine of the one source that made it;
// every other value is built per call.
package podsnapshot
