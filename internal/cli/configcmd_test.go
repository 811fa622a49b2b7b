package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigCheck: berth config check prints one summary line for a good
// file, every problem with its line for a bad one, and warns about older
// names on stderr.
func TestConfigCheck(t *testing.T) {
	good := writeFile(t, "good.yaml", "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nmaxPods: 20\n")
	old := writeFile(t, "old.yaml", "crashLoopBackoffMax: 1m\n")
	bad := writeFile(t, "bad.yaml", "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nmaxPods: many\nstaticPodPth: /x\nsyncFrequency: 0s\n")
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		notOnStdut string
	}{
		{"good", []string{"config", "check", good}, 0, []string{good + ": ok (0 warnings)\n"}, nil, ""},
		{"old names", []string{"config", "check", old}, 0, []string{old + ": ok (2 warnings)\n"},
			[]string{"warning: " + old + ": a config file without apiVersion is deprecated", "warning: " + old + ":1: crashLoopBackoffMax is deprecated: rename it crashLoopBackOffMax"}, ""},
		{"bad", []string{"config", "check", bad}, 1, []string{
			bad + `:3: maxPods: must be an integer, got string "many"` + "\n",
			bad + ":4: staticPodPth: unknown field (did you mean staticPodPath?)\n",
		}, nil, "ok"},
		{"validation with lines", []string{"config", "check", writeFile(t, "v.yaml", "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nsyncFrequency: 0s\n")}, 1,
			[]string{"v.yaml:3: syncFrequency: must be positive, got 0s\n"}, nil, ""},
		{"missing file", []string{"config", "check", "/nonexistent/berth.yaml"}, 1, []string{"/nonexistent/berth.yaml"}, nil, ""},
		{"no file", []string{"config", "check"}, 2, nil, []string{"accepts 1 arg"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Execute("dev", tt.args, &out, &errb); code != tt.code {
				t.Errorf("exit %d, want %d; stdout %q stderr %q", code, tt.code, out.String(), errb.String())
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout %q, want %q in it", out.String(), w)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q, want %q in it", errb.String(), w)
				}
			}
			if tt.notOnStdut != "" && strings.Contains(out.String(), tt.notOnStdut) {
				t.Errorf("stdout %q has %q", out.String(), tt.notOnStdut)
			}
		})
	}
}

// TestConfigWarningsStayWithTheirCommand: each command prints the
// warnings of the files it read, and only those: a command that read an
// unversioned file, or failed on one, leaves nothing for the next.
func TestConfigWarningsStayWithTheirCommand(t *testing.T) {
	old := writeFile(t, "old.yaml", "crashLoopBackoffMax: 1m\n")
	bad := writeFile(t, "bad.yaml", "crashLoopBackoffMax: 1m\nmaxPods: many\n")
	good := writeFile(t, "good.yaml", "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nmaxPods: 20\n")
	// Both files are unversioned and use an older field name.
	warnings := func(path string) string {
		return "warning: " + path + ": a config file without apiVersion is deprecated: begin it with apiVersion: berth.io/v1alpha1 and kind: BerthConfiguration\n" +
			"warning: " + path + ":1: crashLoopBackoffMax is deprecated: rename it crashLoopBackOffMax\n"
	}
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string // the whole of it, when code is not 2
	}{
		{"view of old names", []string{"config", "view", "--config", old}, 0, warnings(old)},
		{"check of a good file", []string{"config", "check", good}, 0, ""},
		{"run with a bad file", []string{"run", "--config", bad}, 2, warnings(bad)},
		{"view of a good file", []string{"config", "view", "--config", good}, 0, ""},
	} {
		var out, errb bytes.Buffer
		code := Execute("dev", tt.args, &out, &errb)
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d; stderr %q", tt.name, code, tt.code, errb.String())
		}
		if tt.code == 2 {
			if !strings.HasPrefix(errb.String(), tt.stderr) || !strings.Contains(errb.String(), `maxPods: must be an integer, got string "many"`) {
				t.Errorf("%s: stderr %q, want the warnings, then the error", tt.name, errb.String())
			}
			continue
		}
		if errb.String() != tt.stderr {
			t.Errorf("%s: stderr %q, want %q", tt.name, errb.String(), tt.stderr)
		}
	}
}

// TestConfigView: berth config view prints the settings after the file
// and the flags as a versioned document, secrets redacted, which config
// check accepts.
func TestConfigView(t *testing.T) {
	conf := writeFile(t, "berth.yaml", "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nmaxPods: 20\nstaticPodURL: https://h/p?token=s3cret\nstaticPodURLHeader:\n  Authorization: [\"Bearer s3cret\"]\nlogLevel: debug\n")
	var out, errb bytes.Buffer
	if code := Execute("dev", []string{"config", "view", "--config", conf, "--max-pods", "30"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	view := out.String()
	for _, want := range []string{"apiVersion: berth.io/v1alpha1\n", "kind: BerthConfiguration\n", "maxPods: 30\n", "logLevel: debug\n", "staticPodURL: https://h/p?token=REDACTED\n", "  - REDACTED\n", "staticPodPath: /etc/kubernetes/manifests\n"} {
		if !strings.Contains(view, want) {
			t.Errorf("no %q in\n%s", want, view)
		}
	}
	if strings.Contains(view, "s3cret") {
		t.Errorf("a secret is printed:\n%s", view)
	}
	printed := writeFile(t, "view.yaml", view)
	out.Reset()
	if code := Execute("dev", []string{"config", "check", printed}, &out, &errb); code != 0 {
		t.Errorf("config check of the view: exit %d: %s", code, out.String())
	}
	out.Reset()
	errb.Reset()
	if code := Execute("dev", []string{"config", "view", "--config", conf, "--max-pods", "0"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--max-pods must be positive") || out.Len() != 0 {
		t.Errorf("bad settings: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
