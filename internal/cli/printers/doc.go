// Package printers is how the berth CLI shows what the daemon answers,
// in kubectl's words and layouts: the -o document formats (json, yaml,
// name, jsonpath and jsonpath-file in document.go), the pod table of
// berth pods with its READY, STATUS and RESTARTS columns computed as
// kubectl's pod printer does (podtable.go), the events table of berth
// events (eventtable.go), and the describe printer of berth describe
// (describe.go, with its probes, lifecycle and newer fields beside it).
//
// It owns the column names, the status words and the describe layout. It
// must never import cobra, internal/cli or internal/cli/apiclient (it is
// handed objects, never fetches them), nor the daemon's side (api,
// syncloop, podworkers, kuberuntime); podspec, podstatus and rollback give
// it the names of annotations, conditions and reasons only.
//
// It keeps no package state. A PodTable or EventTable belongs to the
// command that built it and is not safe for concurrent use; a Printer is
// not changed after New.
package printers
