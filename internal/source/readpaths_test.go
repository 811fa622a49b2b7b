package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

func TestReadPaths(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"a.yaml":        podspectest.Manifest("a", "img:1"),
		"big.yaml":      podspectest.Manifest("big", "img:1") + "# " + strings.Repeat("x", 400) + "\n",
		"b.json":        `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"img:1"}]}}`,
		"a.yaml.backup": podspectest.Manifest("a", "img:0"),
		".hidden.yaml":  podspectest.Manifest("h", "img:0"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	snap := ReadPaths(ReadOptions{NodeName: podspectest.Node, MaxBytes: 300}, dir, filepath.Join(dir, "missing.yaml"))
	var pods, probs []string
	for _, p := range snap.Pods {
		pods = append(pods, p.Name)
	}
	for _, p := range snap.Problems {
		probs = append(probs, p.Reason+" "+filepath.Base(p.Origin))
	}
	if got, want := strings.Join(pods, " "), "a-node1 b-node1"; got != want {
		t.Errorf("pods %q, want %q", got, want)
	}
	if got, want := strings.Join(probs, ", "), "TooLarge big.yaml, Unreadable missing.yaml"; got != want {
		t.Errorf("problems %q, want %q", got, want)
	}
}
