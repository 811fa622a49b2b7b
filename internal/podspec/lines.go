package podspec

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// pathSegment is one step of a field path: a mapping key, or a list index
// when isIndex.
type pathSegment struct {
	key     string
	index   int
	isIndex bool
}

// splitFieldPath parses the paths of field.Path and of strict JSON errors,
// e.g. spec.containers[0].env[1].name or metadata.labels[app.kubernetes.io/name].
// Bracketed numbers are list indexes, other bracketed text map keys.
func splitFieldPath(path string) []pathSegment {
	var segs []pathSegment
	for i := 0; i < len(path); {
		switch path[i] {
		case '.':
			i++
		case '[':
			end := strings.IndexByte(path[i:], ']')
			if end < 0 {
				return append(segs, pathSegment{key: path[i+1:]})
			}
			inner := path[i+1 : i+end]
			if n, err := strconv.Atoi(inner); err == nil {
				segs = append(segs, pathSegment{index: n, isIndex: true})
			} else {
				segs = append(segs, pathSegment{key: inner})
			}
			i += end + 1
		default:
			end := strings.IndexAny(path[i:], ".[")
			if end < 0 {
				end = len(path) - i
			}
			segs = append(segs, pathSegment{key: path[i : i+end]})
			i += end
		}
	}
	return segs
}

// lineOf returns the 1-based line of the field at path inside the YAML node
// of one pod, or of its nearest ancestor that exists (a missing required
// field is reported where its parent is). A nil node gives 0.
func lineOf(node *yaml.Node, path string) int {
	if node == nil {
		return 0
	}
	line := node.Line
	for _, seg := range splitFieldPath(path) {
		keyLine, next := child(node, seg)
		if next == nil {
			return line
		}
		line, node = keyLine, next
	}
	return line
}

// child steps from node along seg, following aliases. keyLine is the line of
// the mapping key (where an editor puts the cursor for the field), or of the
// list item.
func child(node *yaml.Node, seg pathSegment) (keyLine int, next *yaml.Node) {
	for node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	switch {
	case node.Kind == yaml.SequenceNode && seg.isIndex:
		if seg.index >= 0 && seg.index < len(node.Content) {
			n := node.Content[seg.index]
			return n.Line, n
		}
	case node.Kind == yaml.MappingNode && !seg.isIndex:
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value == seg.key {
				return node.Content[i].Line, node.Content[i+1]
			}
		}
	}
	return 0, nil
}

// findByKind locates a field that JSON decoding reported without list
// indexes (spec.containers.ports.containerPort): the first node in document
// order on that path whose JSON kind is jsonKind ("string", "number",
// "bool", "object", "array"). It returns the indexed path and its line, or
// ok=false.
func findByKind(node *yaml.Node, dotted string, jsonKind string) (path string, line int, ok bool) {
	var keys []string
	if dotted != "" {
		keys = strings.Split(dotted, ".")
	}
	return walkByKind(node, keys, jsonKind, "", node.Line)
}

func walkByKind(node *yaml.Node, keys []string, jsonKind, prefix string, line int) (string, int, bool) {
	for node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	if len(keys) == 0 {
		if node.Kind == yaml.SequenceNode && jsonKind != "array" {
			for i, item := range node.Content {
				if p, l, ok := walkByKind(item, nil, jsonKind, prefix+"["+strconv.Itoa(i)+"]", item.Line); ok {
					return p, l, ok
				}
			}
		}
		return prefix, line, jsonKindOf(node) == jsonKind
	}
	switch node.Kind {
	case yaml.SequenceNode:
		for i, item := range node.Content {
			if p, l, ok := walkByKind(item, keys, jsonKind, prefix+"["+strconv.Itoa(i)+"]", item.Line); ok {
				return p, l, ok
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value == keys[0] {
				p := keys[0]
				if prefix != "" {
					p = prefix + "." + keys[0]
				}
				return walkByKind(node.Content[i+1], keys[1:], jsonKind, p, node.Content[i].Line)
			}
		}
	}
	return "", 0, false
}

// jsonKindOf names a YAML node's kind the way encoding/json names JSON
// values in its type errors.
func jsonKindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "array"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "number"
		case "!!bool":
			return "bool"
		case "!!null":
			return "null"
		}
		return "string"
	}
	return ""
}
