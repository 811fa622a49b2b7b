package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestFileSourceSigned checks signed manifest files: a file runs with a
// valid <file>.sig; a changed file without a new signature, a replayed
// older version and an unsigned new file change nothing and are problems;
// a signature published after its file is picked up from its own event.
func TestFileSourceSigned(t *testing.T) {
	ops := newTestKey(t, 1)
	dir := filepath.Join(t.TempDir(), "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	metrics := NewSignatureMetrics(prometheus.NewRegistry())
	web := filepath.Join(dir, "web.yaml")
	signed := func(serial int, img string) (string, string) {
		body := signedBody(serial, img, "web")
		return body, string(ops.sign(t, []byte(body), SignatureNamespace))
	}
	v1, sig1 := signed(1, "img:1")
	renameIn(t, web, v1)
	renameIn(t, web+".sig", sig1)
	store := watchedSource(t, SourceConfig{ManifestPath: dir, StateDir: t.TempDir(),
		FileSigners: mustSigners(t, ops.pub), SignatureMetrics: metrics})
	if got := next(t, store); got != "ADD web-node1 img:1" {
		t.Fatalf("signed file: %q", got)
	}
	waitProblems := func(want string) {
		t.Helper()
		eventually(t, "problems "+want, func() bool { return problemsOf(store) == want })
		if got := len(store.Pods()); got != 1 || store.Pods()[0].Spec.Containers[0].Image == "evil:1" {
			t.Fatalf("pods changed by a refused file: %v", store.Pods())
		}
	}

	// Edited without a new signature: refused, the pod keeps running.
	renameIn(t, web, strings.Replace(v1, "img:1", "evil:1", 1))
	waitProblems("BadSignature web.yaml ")

	// The new version's signature arrives after its body.
	v2, sig2 := signed(2, "img:2")
	renameIn(t, web, v2)
	waitProblems("BadSignature web.yaml ")
	renameIn(t, web+".sig", sig2)
	if got := next(t, store); got != "REMOVE web-node1 img:1" {
		t.Fatalf("serial 2: %q", got)
	}
	if got := next(t, store); got != "ADD web-node1 img:2" {
		t.Fatalf("serial 2: %q", got)
	}
	eventually(t, "no problem", func() bool { return problemsOf(store) == "" })

	// Version 1 again, validly signed: a replay.
	renameIn(t, web+".sig", sig1)
	renameIn(t, web, v1)
	waitProblems("Replayed web.yaml ")

	// A new file without signature starts nothing.
	renameIn(t, filepath.Join(dir, "new.yaml"), podManifest("new", "img:1"))
	waitProblems("Unsigned new.yaml \nReplayed web.yaml ")
	noUpdate(t, store)
	if n := testutil.ToFloat64(metrics.failures.WithLabelValues(SourceFile, ReasonUnsigned)); n != 1 {
		t.Fatalf("failures{file,Unsigned} = %v, want 1", n)
	}
}

func TestSignatureFileOf(t *testing.T) {
	for name, want := range map[string]string{
		"/m/web.yaml.sig": "/m/web.yaml", "/m/web.json.sig": "/m/web.json", "/m/web.yaml": "",
		"/m/.web.yaml.sig": "", "/m/web.txt.sig": "", "/m/.sig": "",
	} {
		if got := signatureFileOf(name); got != want {
			t.Errorf("signatureFileOf(%q) = %q, want %q", name, got, want)
		}
	}
}
