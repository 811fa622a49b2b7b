package cli

import (
	"bytes"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestExecute checks the command line's contract: help on stdout, usage
// errors as one line plus where to read the usage with exit 2, and the
// flags every command shares.
func TestExecute(t *testing.T) {
	missing := t.TempDir() + "/missing.sock"
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		// noStderr asserts nothing went to stderr.
		noStderr bool
	}{
		{"no args prints usage", nil, 2, "", "Usage:\n  berth", false},
		{"help", []string{"--help"}, 0, "Available Commands:", "", true},
		{"help command", []string{"help", "pods"}, 0, "-A, --all-namespaces", "", true},
		{"unknown", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`, false},
		{"version --client", []string{"version", "--client"}, 0, "Client Version: dev (" + runtime.Version(), "", true},
		{"--version", []string{"--version"}, 0, "berth dev (" + runtime.Version(), "", true},
		{"version help", []string{"version", "--help"}, 0, "Prints the version", "", true},
		{"version rejects args", []string{"version", "x"}, 2, "", `unknown command "x" for "berth version"`, false},
		{"run help on stdout", []string{"run", "--help"}, 0, "--http-rollback-after duration", "", true},
		{"run rejects arguments", []string{"run", "x"}, 2, "", `unknown command "x" for "berth run"`, false},
		{"long flags have two dashes", []string{"pods", "--help"}, 0, "-n, --namespace string", "", true},
		{"pods -A", []string{"pods", "-A", "--socket", missing}, 1, "", "berth pods: berth daemon not reachable", false},
		{"unknown flag", []string{"pods", "--frobnicate"}, 2, "", "berth pods: unknown flag: --frobnicate\nSee 'berth pods --help'.\n", false},
		{"unknown shorthand", []string{"ps", "-Z"}, 2, "", "See 'berth pods --help'.", false},
		{"bad flag value", []string{"logs", "web", "--tail", "x"}, 2, "", `invalid argument "x" for "--tail"`, false},
		{"completion", []string{"completion", "bash"}, 0, "__start_berth", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Execute("dev", tt.args, &out, &errb)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.wantCode, errb.String())
			}
			if !strings.Contains(out.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", out.String(), tt.wantStdout)
			}
			if !strings.Contains(errb.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", errb.String(), tt.wantStderr)
			}
			if tt.noStderr && errb.Len() != 0 {
				t.Errorf("stderr = %q, want nothing", errb.String())
			}
		})
	}
}

// TestUsageErrorIsOneLine: a usage error is its message and the pointer
// to --help, never the whole usage.
func TestUsageErrorIsOneLine(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Execute("dev", []string{"pods", "--frobnicate"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d", code)
	}
	if lines := strings.Split(strings.TrimSpace(errb.String()), "\n"); len(lines) != 2 || out.Len() != 0 {
		t.Errorf("stdout %q stderr %q, want two lines on stderr", out.String(), errb.String())
	}
}

// TestSingleDashRunFlags: `berth run` still takes the long flags Go's flag
// package accepted with one dash, warning once; other commands and
// one-letter flags are left alone.
func TestSingleDashRunFlags(t *testing.T) {
	root := NewRoot("dev", &bytes.Buffer{}, &bytes.Buffer{})
	tests := []struct {
		name     string
		args     []string
		want     []string
		wantWarn string
	}{
		{"rewritten", []string{"run", "-pod-manifest-path", "/m", "-root-dir=/r", "--socket", ""},
			[]string{"run", "--pod-manifest-path", "/m", "--root-dir=/r", "--socket", ""},
			"berth run: flags with one dash are deprecated, give them two: --pod-manifest-path, --root-dir\n"},
		{"double dash untouched", []string{"run", "--pod-manifest-path", "/m"}, []string{"run", "--pod-manifest-path", "/m"}, ""},
		{"shorthand untouched", []string{"run", "-h"}, []string{"run", "-h"}, ""},
		{"unknown name untouched", []string{"run", "-frobnicate"}, []string{"run", "-frobnicate"}, ""},
		{"after --", []string{"run", "--", "-root-dir"}, []string{"run", "--", "-root-dir"}, ""},
		{"other commands untouched", []string{"pods", "-namespace", "x"}, []string{"pods", "-namespace", "x"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warn bytes.Buffer
			got := singleDashRunFlags(root, tt.args, &warn)
			if strings.Join(got, " ") != strings.Join(tt.want, " ") || warn.String() != tt.wantWarn {
				t.Errorf("got %q warning %q, want %q warning %q", got, warn.String(), tt.want, tt.wantWarn)
			}
		})
	}
}

// TestRunSingleDashFlagsParse: the rewritten flags reach the settings; a
// bad setting given with one dash fails as with two, exit 2.
func TestRunSingleDashFlagsParse(t *testing.T) {
	var out, errb bytes.Buffer
	code := Execute("dev", []string{"run", "-pod-manifest-path", "", "-max-pods", "0"}, &out, &errb)
	if code != 2 || !regexp.MustCompile(`(?s)deprecated.*--max-pods must be positive, got 0`).MatchString(errb.String()) {
		t.Errorf("exit %d stderr %q, want 2, the warning and the settings' errors", code, errb.String())
	}
	if !strings.Contains(errb.String(), "no pod source") {
		t.Errorf("stderr %q: -pod-manifest-path \"\" did not reach the settings", errb.String())
	}
}
