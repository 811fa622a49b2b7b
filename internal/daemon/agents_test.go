package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRefuseOtherAgents: on a fake /proc, berth refuses a manifest
// directory a kubelet or another berth runs, naming the PID, the process,
// the directory and the fix; never because of itself, of agents on other
// directories, or when its file source is off; a process whose directory
// cannot be told is a warning in the log, not a refusal.
func TestRefuseOtherAgents(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	type proc struct {
		pid  string
		argv []string
	}
	tests := []struct {
		name     string
		procs    []proc
		manifest string   // the --pod-manifest-path asked about
		errIn    []string // in the error; none: no refusal
		logIn    string   // in the log
	}{
		{"kubelet", []proc{{"4242", []string{"/usr/bin/kubelet", "--pod-manifest-path", dir}}}, dir,
			[]string{"kubelet (PID 4242) runs the static pods of " + dir, "berth will not start on " + dir, "stop the kubelet or point one of them elsewhere"}, ""},
		{"another berth", []proc{{"77", []string{"/usr/bin/berth", "run", "--pod-manifest-path=" + dir}}}, dir,
			[]string{"berth (PID 77)", "stop the other berth or point"}, ""},
		{"both", []proc{{"77", []string{"berth", "run", "--pod-manifest-path=" + dir}}, {"4242", []string{"kubelet", "--pod-manifest-path=" + dir}}}, dir,
			[]string{"berth (PID 77) runs", "; kubelet (PID 4242) runs", "stop the other berth and stop the kubelet or point"}, ""},
		{"relative path", []proc{{"4242", []string{"kubelet", "--pod-manifest-path", dir}}}, "manifests",
			[]string{"kubelet (PID 4242)", "will not start on " + dir}, ""},
		{"itself", []proc{{self, []string{"/usr/bin/berth", "run", "--pod-manifest-path", dir}}}, dir, nil, ""},
		{"elsewhere", []proc{{"4242", []string{"kubelet", "--pod-manifest-path", filepath.Join(base, "other")}}}, dir, nil, ""},
		{"not an agent", []proc{{"4242", []string{"/bin/sleep", "--pod-manifest-path", dir}}}, dir, nil, ""},
		{"file source off", []proc{{"4242", []string{"kubelet", "--pod-manifest-path", ""}}}, "", nil, ""},
		{"unreadable kubelet config", []proc{{"4242", []string{"kubelet", "--config", filepath.Join(base, "missing.yaml")}}}, dir, nil,
			"cannot tell which directory this process runs static pods from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(base)
			procRoot := t.TempDir()
			for _, p := range tt.procs {
				d := filepath.Join(procRoot, p.pid)
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, "cmdline"), []byte(strings.Join(p.argv, "\x00")+"\x00"), 0o444); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("/", filepath.Join(d, "cwd")); err != nil {
					t.Fatal(err)
				}
			}
			var logs bytes.Buffer
			err := refuseOtherAgents(procRoot, tt.manifest, slog.New(slog.NewTextHandler(&logs, nil)))
			if len(tt.errIn) == 0 && err != nil {
				t.Errorf("refused: %v", err)
			}
			if len(tt.errIn) > 0 && err == nil {
				t.Errorf("not refused, want %q", tt.errIn)
			}
			for _, in := range tt.errIn {
				if err != nil && !strings.Contains(err.Error(), in) {
					t.Errorf("error %q lacks %q", err, in)
				}
			}
			if !strings.Contains(logs.String(), tt.logIn) {
				t.Errorf("log %q lacks %q", logs.String(), tt.logIn)
			}
		})
	}
}

// TestRefuseOtherAgentsNoProc: a /proc that cannot be listed (another
// mount, hidepid) is a warning, not a refusal.
func TestRefuseOtherAgentsNoProc(t *testing.T) {
	var logs bytes.Buffer
	if err := refuseOtherAgents(filepath.Join(t.TempDir(), "none"), t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Errorf("refused: %v", err)
	}
	if !strings.Contains(logs.String(), "cannot tell whether a kubelet or another berth") {
		t.Errorf("log %q lacks the warning", logs.String())
	}
}
