package httpsource

import (
	"fmt"
	"sort"
	"strings"

	"github.com/berth-agent/berth/internal/podspec"
)

// URLVars are what the placeholders of a URL template stand for: {node} the
// node name, {arch} the machine's architecture (GOARCH, as in the
// kubernetes.io/arch label: amd64, arm64, ...), {label.KEY} the value of
// label KEY of the config file's labels.
type URLVars struct {
	Node   string
	Arch   string
	Labels map[string]string
}

// ExpandURL replaces the placeholders of a URL template (--manifest-url,
// and --status-url) so that one server serves each node its own set, or
// its group's: https://m.example/{label.site}/{node}.yaml. Every byte of a
// value but RFC 3986's unreserved ones is percent-encoded, so a value is
// one path segment or query value wherever it stands. A placeholder that is unknown, a label the node does not
// have, or an unbalanced brace is an error naming it: a URL that silently
// kept "{label.stie}" would fetch nothing, or the wrong group's pods.
// Braces have no other use in a URL (RFC 3986 does not allow them
// unescaped), so there is no escape for a literal one.
func ExpandURL(template string, v URLVars) (string, error) {
	var b strings.Builder
	rest := template
	for {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			b.WriteString(rest)
			break
		}
		if rest[open] == '}' {
			return "", fmt.Errorf("URL %q: unmatched \"}\"", podspec.RedactURL(template))
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] != '}' {
			return "", fmt.Errorf("URL %q: unmatched \"{\"", podspec.RedactURL(template))
		}
		name := rest[open+1 : open+1+end]
		val, err := v.lookup(name)
		if err != nil {
			return "", fmt.Errorf("URL %q: placeholder {%s}: %w", podspec.RedactURL(template), name, err)
		}
		b.WriteString(rest[:open])
		escapeUnreserved(&b, val)
		rest = rest[open+1+end+1:]
	}
	return b.String(), nil
}

// lookup is the value of one placeholder; an empty value is an error, as a
// URL with an empty path segment names another resource.
func (v URLVars) lookup(name string) (string, error) {
	var val string
	switch {
	case name == "node":
		val = v.Node
	case name == "arch":
		val = v.Arch
	case strings.HasPrefix(name, "label."):
		key := strings.TrimPrefix(name, "label.")
		l, ok := v.Labels[key]
		if !ok {
			return "", fmt.Errorf("no label %q in the config file's labels (%s)", key, v.labelKeys())
		}
		val = l
	default:
		return "", fmt.Errorf("unknown: use {node}, {arch} or {label.KEY}")
	}
	if val == "" {
		return "", fmt.Errorf("empty value")
	}
	return val, nil
}

// labelKeys lists the known labels for an error message.
func (v URLVars) labelKeys() string {
	if len(v.Labels) == 0 {
		return "there are none"
	}
	keys := make([]string, 0, len(v.Labels))
	for k := range v.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return "there are " + strings.Join(keys, ", ")
}

// escapeUnreserved writes val with every byte but A-Z a-z 0-9 - . _ ~
// percent-encoded.
func escapeUnreserved(b *strings.Builder, val string) {
	for i := 0; i < len(val); i++ {
		c := val[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		default:
			fmt.Fprintf(b, "%%%02X", c)
		}
	}
}
