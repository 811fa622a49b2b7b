// Package podspec is berth's Pod model: it turns one manifest (a file or an
// HTTP body) into pods and Problems. It decodes YAML and JSON with the file,
// line and field of every error, withholds Secret values from messages,
// gives each pod its static-pod identity (name, namespace, UID and the
// config annotations), applies the API defaults and validation of package
// podrules, decodes and checks the ConfigMaps and Secrets a manifest
// defines and lists the pods' references to them (ObjectRefs). Its Result
// is one manifest's pods, objects and problems, with the warnings of the
// pods berth runs all the same (fields berth ignores) and the lines of
// their host-port claims, for package podsnapshot's clash check.
//
// The flow through the desired-state packages: Parse turns one manifest
// into a Result; the sources (package source) read files and URLs, keep
// every manifest's last good Result and have package podsnapshot assemble
// them into a Snapshot for the store (package store), which diffs
// snapshots into pod updates.
//
// It must never import podsnapshot (which imports it), the sources, the
// store, the agent or the runtime: it reads no file and knows nothing of
// CRI.
//
// It has no mutable state of its own: every value is built per call.
package podspec
