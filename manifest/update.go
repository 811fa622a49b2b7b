// Package manifest is berth's desired state: it decodes, defaults and
// validates Pod manifests, watches the file and HTTP sources, and merges their
// snapshots into ordered pod updates. It knows nothing of CRI.
//
// The flow: Parse turns one manifest into pods and Problems; the file source
// (filesource.go) and the HTTP source (httpsource.go) keep the last good
// result of every manifest and send full Snapshots to the Store, which diffs
// them into PodUpdates. The agent starts it all with
//
//	store := NewStore(cfg.SourceNames()...)
//	go Run(ctx, cfg, store)
//	for u := range store.Updates() { ... }
//
// and asks the store for SourcesReady, Pods and Problems at any time.
package manifest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Source names, as written into the kubernetes.io/config.source annotation.
const (
	SourceFile = "file"
	SourceHTTP = "http"
)

// Op is what a PodUpdate asks the agent to do with its pods.
type Op int

const (
	// OpAdd: pods the agent has not seen from this source.
	OpAdd Op = iota
	// OpUpdate: same UID, but spec, labels or annotations differ semantically.
	OpUpdate
	// OpRemove: pods the source no longer lists.
	OpRemove
	// OpReconcile: same UID and spec; only bookkeeping changed (for example
	// the config.seen annotation). The agent refreshes without restarting.
	OpReconcile
)

func (o Op) String() string {
	switch o {
	case OpAdd:
		return "ADD"
	case OpUpdate:
		return "UPDATE"
	case OpRemove:
		return "REMOVE"
	case OpReconcile:
		return "RECONCILE"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// PodUpdate is one incremental change to the pods of one source. Pods are
// fully defaulted and validated; the agent must not modify them.
type PodUpdate struct {
	Op     Op
	Source string
	Pods   []*v1.Pod
}

// Problem is a manifest berth refused, or a source it could not read. It is
// kept for display (the local API, metrics, logs), never silently dropped.
type Problem struct {
	Source string // SourceFile or SourceHTTP
	Origin string // file path or URL
	Line   int    // 1-based; 0 when unknown
	Field  string // field path such as spec.containers[0].image; "" for whole-file errors
	// Reason is a short CamelCase word for status and metrics: one of the
	// Reason* constants (DecodeError, Empty, TooLarge, Invalid,
	// Unsupported, DuplicateName, DuplicateUID, Unreadable, Unreachable).
	Reason  string
	Message string
	// Name and Namespace are the defaulted pod identity when the manifest got
	// that far (the name carries the node suffix), so the agent can show the
	// rejected pod in /pods; empty otherwise.
	Name      string
	Namespace string
}

// Error renders the problem as FILE:LINE: FIELD: MESSAGE, the format of
// `berth validate` and of the logs.
func (p Problem) Error() string {
	s := p.Origin
	if p.Line > 0 {
		s += fmt.Sprintf(":%d", p.Line)
	}
	if p.Field != "" {
		s += ": " + p.Field
	}
	return s + ": " + p.Message
}
