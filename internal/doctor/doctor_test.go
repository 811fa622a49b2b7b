package doctor

import (
	"path/filepath"
	"testing"
)

// TestRunWithoutRuntime: Run dials an endpoint nothing listens on; the
// runtime line fails saying the socket is missing, every check that needs
// the runtime says it was not checked, the others are made, and the exit
// status is 1.
func TestRunWithoutRuntime(t *testing.T) {
	dir := t.TempDir()
	proc := newFakeProc(t)
	results := Run(t.Context(), Options{
		RuntimeEndpoint: "unix://" + filepath.Join(dir, "containerd.sock"),
		ManifestDir:     filepath.Join(dir, "manifests"),
		RootDir:         filepath.Join(dir, "root"),
		PodLogsDir:      filepath.Join(dir, "logs"),
		Socket:          filepath.Join(dir, "berth.sock"),
		CNIConfDir:      filepath.Join(dir, "net.d"),
		ProcRoot:        proc.root,
		Run:             true,
	})
	want := []struct {
		check  string
		status Status
	}{
		{"runtime", Fail}, {"runtime-events", Warn}, {"cni", Fail}, {"pause-image", Warn}, {"cgroups", Warn},
		{"manifest-dir", ""}, {"other-agents", OK}, {"clock", ""}, {"image-fs", Warn}, {"root-fs", ""},
		{"logs-fs", ""}, {"socket", Warn}, {"cluster", OK}, {"pod-network", Warn},
	}
	if len(results) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(results), len(want), results)
	}
	for i, w := range want {
		r := results[i]
		if r.Check != w.check || (w.status != "" && r.Status != w.status) {
			t.Errorf("result %d: %s %s (%s), want %s %s", i, r.Check, r.Status, r.Message, w.check, w.status)
		}
	}
	checkResult(t, results[0], Fail, "does not exist; is the runtime running?")
	checkResult(t, results[1], Warn, "not checked")
	if Worst(results) != 1 {
		t.Errorf("exit status %d, want 1", Worst(results))
	}
}
