package source

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/store"
)

// TestFileSourcePodWarnings: two files claiming one host port both run;
// the later pod's clash and an ignored field are logged once, not on
// every send, and again only when they change.
func TestFileSourcePodWarnings(t *testing.T) {
	dir := t.TempDir()
	port := "    ports:\n    - containerPort: 80\n      hostPort: 8080\n"
	write(t, filepath.Join(dir, "a.yaml"), podspectest.Manifest("a", "img:1")+port)
	write(t, filepath.Join(dir, "b.yaml"), podspectest.Manifest("b", "img:1")+port+"  nodeSelector:\n    disk: ssd\n")
	var logs strings.Builder
	cfg := Config{NodeName: podspectest.Node, ManifestPath: dir}
	st := store.New(cfg.SourceNames()...)
	fs := newFileSource(cfg, st)
	fs.watch = false
	fs.log = slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()
	for range 2 {
		fs.rescan(true)
		if err := fs.send(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := next(t, st); got != "ADD a-node1 img:1\nADD b-node1 img:1" {
		t.Fatalf("pods = %q, want both", got)
	}
	clash := `hostPort TCP/0.0.0.0/8080 clashes with TCP/0.0.0.0/8080 of pod \"a-node1\" at ` + filepath.Join(dir, "a.yaml") + `:11`
	ignored := "field=spec.nodeSelector reason=IgnoredField pod=b-node1"
	for _, want := range []string{clash, ignored} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", want, n, logs.String())
		}
	}
	write(t, filepath.Join(dir, "a.yaml"), podspectest.Manifest("a", "img:1"))
	fs.rescan(true)
	if err := fs.send(ctx); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "pod warning"); n != 2 {
		t.Errorf("%d pod warnings logged after the clash went, want the 2 from before:\n%s", n, logs.String())
	}
}
