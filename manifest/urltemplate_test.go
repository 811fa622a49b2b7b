package manifest

import (
	"runtime"
	"strings"
	"testing"
)

func TestExpandURLTemplate(t *testing.T) {
	labels := map[string]string{"site": "lyon 2", "evil": "../x?y=1"}
	for _, tt := range []struct {
		tmpl, want, err string
	}{
		{"https://h/status/{node}.json", "https://h/status/edge-1.json", ""},
		{"https://h/{arch}/{label.site}/{node}", "https://h/" + runtime.GOARCH + "/lyon%202/edge-1", ""},
		{"https://h/{label.evil}", "https://h/..%2Fx%3Fy=1", ""},
		{"https://h/plain", "https://h/plain", ""},
		{"https://h/{label.rack}", "", `no label "rack"`},
		{"https://h/{hostname}", "", "unknown placeholder {hostname}"},
		{"https://h/{node", "", "unclosed {"},
	} {
		got, err := ExpandURLTemplate(tt.tmpl, "edge-1", labels)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want %q", tt.tmpl, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s = %q, %v; want %q", tt.tmpl, got, err, tt.want)
		}
	}
}
