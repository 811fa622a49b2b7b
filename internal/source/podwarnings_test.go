package source

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/store"
)

// TestFileSourcePodWarnings: two files claiming one host port both run,
// and the store has the later pod's clash and its ignored field as
// warnings, until the clash goes.
func TestFileSourcePodWarnings(t *testing.T) {
	dir := t.TempDir()
	port := "    ports:\n    - containerPort: 80\n      hostPort: 8080\n"
	write(t, filepath.Join(dir, "a.yaml"), podspectest.Manifest("a", "img:1")+port)
	write(t, filepath.Join(dir, "b.yaml"), podspectest.Manifest("b", "img:1")+port+"  nodeSelector:\n    disk: ssd\n")
	cfg := Config{NodeName: podspectest.Node, ManifestPath: dir}
	st := store.New(cfg.SourceNames()...)
	fs := newFileSource(cfg, st)
	fs.watch = false
	send := func() {
		t.Helper()
		fs.rescan(true)
		if err := fs.send(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	reasons := func() []string {
		var out []string
		for _, w := range st.Warnings() {
			if w.Name != "b-"+podspectest.Node || w.Origin != filepath.Join(dir, "b.yaml") {
				t.Errorf("warning not of b.yaml's pod: %+v", w)
			}
			out = append(out, w.Reason)
		}
		return out
	}
	send()
	if got := next(t, st); got != "ADD a-node1 img:1\nADD b-node1 img:1" {
		t.Fatalf("pods = %q, want both", got)
	}
	if got := reasons(); len(got) != 2 || got[0] != podspec.ReasonHostPortConflict || got[1] != podspec.ReasonIgnoredField {
		t.Errorf("warnings %q, want the clash (line 11) and the ignored field (line 12)", got)
	}
	write(t, filepath.Join(dir, "a.yaml"), podspectest.Manifest("a", "img:1"))
	send()
	if got := reasons(); len(got) != 1 || got[0] != podspec.ReasonIgnoredField {
		t.Errorf("once the clash went: warnings %q, want the ignored field", got)
	}
}
