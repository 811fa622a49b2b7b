package podspec

import (
	"bytes"
	"fmt"
)

// ReasonTooManyDocuments is a manifest holding more pods than berth would
// ever run from it.
const ReasonTooManyDocuments = "TooManyDocuments"

// DefaultMaxPods is the kubelet's --max-pods, used when the sources' Config sets
// none.
const DefaultMaxPods = 110

// minDocuments is the floor of the per-manifest document limit, so a small
// --max-pods never refuses an ordinary file with a few empty documents.
const minDocuments = 16

// MaxDocuments is how many documents (and pods: PodList items count too)
// one manifest file or HTTP body may hold: twice --max-pods, at least 16.
// No manifest can usefully hold more pods than the node runs (those beyond
// --max-pods are refused anyway), and twice that leaves room for empty
// documents and for the whole node's pods in one body. Past it the
// manifest is refused before its pods are decoded: decoding 100,000 tiny
// pods took the daemon to ~1 GB of memory.
func MaxDocuments(maxPods int) int {
	if maxPods <= 0 {
		maxPods = DefaultMaxPods
	}
	return max(2*maxPods, minDocuments)
}

// tooManyDocuments is the problem of a manifest past the limit.
func tooManyDocuments(origin Origin, limit int) Problem {
	return Problem{Source: origin.Source, Origin: origin.Path, Reason: ReasonTooManyDocuments,
		Message: fmt.Sprintf("manifest holds more than %d documents or pods, the limit (twice --max-pods, at least %d); "+
			"the whole manifest is refused: split it, or raise --max-pods", limit, minDocuments)}
}

// countDocuments reports whether data holds more than limit YAML documents,
// counting "---" markers at the start of a line without parsing: a marker
// there always starts a document (YAML forbids it inside any scalar), so
// this is an upper bound, and it costs no allocation however many there are.
func countDocuments(data []byte, limit int) bool {
	markers := 0
	for rest := data; len(rest) >= 3; {
		if rest[0] == '-' && rest[1] == '-' && rest[2] == '-' && (len(rest) == 3 || isYAMLSpace(rest[3])) {
			markers++
			if markers > limit {
				return true
			}
		}
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		rest = rest[i+1:]
	}
	return false
}

func isYAMLSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r'
}

// ParseLimited is Parse with the document limit of MaxDocuments(maxPods):
// a manifest past it becomes one TooManyDocuments problem and no pods,
// found before any pod is decoded.
func ParseLimited(data []byte, origin Origin, nodeName string, maxPods int) Result {
	return ParseKeyed(data, origin, nodeName, maxPods, nil)
}

// ParseKeyed is ParseLimited with the node's UID key, for the sources.
func ParseKeyed(data []byte, origin Origin, nodeName string, maxPods int, key []byte) Result {
	limit := MaxDocuments(maxPods)
	if countDocuments(data, limit) {
		return Result{Problems: []Problem{tooManyDocuments(origin, limit)}}
	}
	return parse(data, origin, nodeName, limit, key)
}
