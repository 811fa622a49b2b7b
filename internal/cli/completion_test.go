package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompletion runs cobra's hidden __complete command, as the shells'
// scripts do, against the fake daemon: pod names honour -n, -c lists the
// given pod's containers, and without a daemon nothing is offered and
// no error printed.
func TestCompletion(t *testing.T) {
	d := startFakeDaemon(t)
	missing := filepath.Join(t.TempDir(), "missing.sock")
	tests := []struct {
		name string
		args []string
		want []string
		// directive is the last line when not :4 (no file completion).
		directive string
	}{
		{"pods by prefix", []string{"logs", "--socket", d.socket, "cra"}, []string{"crash-node1"}, ""},
		{"pods of a namespace", []string{"pods", "--socket", d.socket, "-n", "kube-system", ""}, []string{"etcd-node1"}, ""},
		{"all namespaces", []string{"describe", "--socket", d.socket, "-n", "default", "-A", "et"}, []string{"etcd-node1"}, ""},
		{"describe after pod", []string{"describe", "--socket", d.socket, "pod", "web-"}, []string{"web-node1"}, ""},
		{"logs takes one pod", []string{"logs", "--socket", d.socket, "web", ""}, nil, ""},
		{"containers of a pod", []string{"logs", "--socket", d.socket, "init", "-c", ""}, []string{"fetch", "unpack", "app"}, ""},
		{"containers by manifest name and prefix", []string{"logs", "--socket", d.socket, "init", "--container", "u"}, []string{"unpack"}, ""},
		{"namespaces", []string{"pods", "--socket", d.socket, "-n", "kube"}, []string{"kube-system"}, ""},
		{"output formats", []string{"version", "-o", ""}, []string{"json", "yaml"}, ""},
		// jsonpath= wants its template right after it: no space (:6).
		{"output formats with templates", []string{"pods", "-o", ""}, []string{"wide", "json", "yaml", "name", "jsonpath=", "jsonpath-file="}, ":6"},
		{"labels", []string{"pods", "--socket", d.socket, "-l", "app"}, []string{"app=web"}, ""},
		{"event pods", []string{"events", "--socket", d.socket, "cra"}, []string{"crash-node1"}, ""},
		{"no daemon", []string{"logs", "--socket", missing, ""}, nil, ""},
		{"no daemon, containers", []string{"logs", "--socket", missing, "web", "-c", ""}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Execute("dev", append([]string{"__complete"}, tt.args...), &out, &errb); code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errb.String())
			}
			// cobra notes the directive on stderr, which the shells'
			// scripts discard; nothing else may go there.
			directive, note := ":4", "ShellCompDirectiveNoFileComp"
			if tt.directive != "" {
				directive, note = tt.directive, "ShellCompDirectiveNoSpace, ShellCompDirectiveNoFileComp"
			}
			if e := strings.TrimPrefix(errb.String(), "Completion ended with directive: "+note+"\n"); e != "" {
				t.Errorf("stderr %q, want only the directive", errb.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			// The last line is the directive: no file names.
			if last := lines[len(lines)-1]; last != directive {
				t.Errorf("directive %q, want %s", last, directive)
			}
			got := lines[:len(lines)-1]
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("completions %q, want %q", got, tt.want)
			}
		})
	}
}
