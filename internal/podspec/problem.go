package podspec

import (
	"fmt"
)

// Source names, as written into the kubernetes.io/config.source annotation.
const (
	SourceFile = "file"
	SourceHTTP = "http"
)

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
