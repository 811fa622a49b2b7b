package manifest

import (
	"fmt"
	"net/url"
	"runtime"
	"strings"
)

// ExpandURLTemplate fills the placeholders of a fleet URL: {node} (the
// node name), {arch} (GOARCH) and {label.KEY} (a label of the config
// file). Values are path-escaped, so a label cannot add a path segment or a
// query; an unknown placeholder or a label that is not set is an error at
// start rather than a request to a wrong URL.
//
// This is the placeholder expansion of --status-url until the manifest
// URL's own (issue 17, item 2) replaces it.
func ExpandURLTemplate(tmpl, node string, labels map[string]string) (string, error) {
	var b strings.Builder
	rest := tmpl
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(rest)
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed { in %q", RedactURL(tmpl))
		}
		b.WriteString(rest[:open])
		name := rest[open+1 : open+end]
		var val string
		switch key, isLabel := strings.CutPrefix(name, "label."); {
		case name == "node":
			val = node
		case name == "arch":
			val = runtime.GOARCH
		case isLabel:
			v, ok := labels[key]
			if !ok {
				return "", fmt.Errorf("placeholder {%s}: no label %q is set", name, key)
			}
			val = v
		default:
			return "", fmt.Errorf("unknown placeholder {%s}: use {node}, {arch} or {label.KEY}", name)
		}
		b.WriteString(url.PathEscape(val))
		rest = rest[open+end+1:]
	}
	return b.String(), nil
}
