package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/source/signature"
	"github.com/berth-agent/berth/internal/source/signature/signaturetest"
	"github.com/berth-agent/berth/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// TestFileSourceSigned checks signed manifest files: a file runs with a
// valid <file>.sig; a changed file without a new signature, a replayed
// older version and an unsigned new file change nothing and are problems;
// a signature published after its file is picked up from its own event.
func TestFileSourceSigned(t *testing.T) {
	ops := signaturetest.NewKey(t, 1)
	dir := filepath.Join(t.TempDir(), "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	web := filepath.Join(dir, "web.yaml")
	signed := func(serial int, img string) (string, string) {
		body := signedBody(serial, img, "web")
		return body, string(ops.Sign(t, []byte(body), SignatureNamespace))
	}
	v1, sig1 := signed(1, "img:1")
	renameIn(t, web, v1)
	renameIn(t, web+".sig", sig1)
	st := watchedSource(t, Config{ManifestPath: dir, StateDir: t.TempDir(),
		FileSigners: mustSigners(t, ops.Pub), Metrics: metrics})
	if got := next(t, st); got != "ADD web-node1 img:1" {
		t.Fatalf("signed file: %q", got)
	}
	serial := func() float64 { return gauge(t, reg, "berth_source_accepted_serial", podspec.SourceFile, dir) }
	if got := serial(); got != 1 {
		t.Fatalf("accepted serial %v, want 1", got)
	}
	if got := gauge(t, reg, "berth_source_last_success_timestamp_seconds", podspec.SourceFile, dir); got == 0 {
		t.Fatal("no last success after the source read the directory")
	}
	waitProblems := func(want string) {
		t.Helper()
		eventually(t, "problems "+want, func() bool { return problemsOf(st) == want })
		if got := len(st.Pods()); got != 1 || st.Pods()[0].Spec.Containers[0].Image == "evil:1" {
			t.Fatalf("pods changed by a refused file: %v", st.Pods())
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
	if got := next(t, st); got != "REMOVE web-node1 img:1" {
		t.Fatalf("serial 2: %q", got)
	}
	if got := next(t, st); got != "ADD web-node1 img:2" {
		t.Fatalf("serial 2: %q", got)
	}
	eventually(t, "no problem", func() bool { return problemsOf(st) == "" })
	if got := serial(); got != 2 {
		t.Fatalf("accepted serial %v, want 2", got)
	}

	// Version 1 again, validly signed: a replay.
	renameIn(t, web+".sig", sig1)
	renameIn(t, web, v1)
	waitProblems("Replayed web.yaml ")
	if got := serial(); got != 2 {
		t.Fatalf("accepted serial %v after a replay, want 2", got)
	}

	// A new file without signature starts nothing.
	renameIn(t, filepath.Join(dir, "new.yaml"), podspectest.Manifest("new", "img:1"))
	waitProblems("Unsigned new.yaml \nReplayed web.yaml ")
	noUpdate(t, st)
	if n := signatureFailures(t, reg, podspec.SourceFile, signature.ReasonUnsigned); n != 1 {
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

// TestFileSourceSignedSerialPerPod checks that a signed manifest's serial
// is bound to the pods (and objects) it defines, not to its file name:
// an older signed version of a pod never runs, whatever file it is
// dropped in, after the pod's file was removed, after a restart, or after
// an upgrade from an earlier berth that kept serials per file. A refused
// body yields no pod, so the running version is never taken for a
// duplicate, stopped or restarted.
func TestFileSourceSignedSerialPerPod(t *testing.T) {
	ops := signaturetest.NewKey(t, 1)
	v1, v2, v3 := signedBody(1, "img:1", "web"), signedBody(2, "img:2", "web"), signedBody(3, "img:3", "web")
	v2b := signedBody(2, "img:2b", "web")
	configMap := func(serial int, version string) string {
		return fmt.Sprintf("# berth.io/serial: %d\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  version: %q\n", serial, version)
	}
	type step struct {
		restart bool // stop the sources, change the files, start them again
		legacy  bool // with restart: the serials as an earlier berth left them
		// files are written (their signature first) or, when "", removed
		// with their signature.
		files map[string]string
		// ops are the store's updates the step causes; pods and problems
		// what it shows once they came.
		ops, pods, problems string
	}
	for _, tt := range []struct {
		name  string
		steps []step // the first one's files are there at the first start
	}{
		{"older version under another name", []step{
			{files: map[string]string{"web.yaml": v2}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{files: map[string]string{"0-web.yaml": v1}, pods: "web-node1 img:2", problems: "Replayed 0-web.yaml "},
		}},
		{"older version after its file was removed", []step{
			{files: map[string]string{"web.yaml": v2}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{files: map[string]string{"web.yaml": ""}, ops: "REMOVE web-node1 img:2"},
			{files: map[string]string{"0-web.yaml": v1}, problems: "Replayed 0-web.yaml "},
			{files: map[string]string{"web.yaml": v1}, problems: "Replayed 0-web.yaml \nReplayed web.yaml "},
			{files: map[string]string{"web.yaml": v3}, ops: "ADD web-node1 img:3", pods: "web-node1 img:3", problems: "Replayed 0-web.yaml "},
		}},
		{"older version under another name across a restart", []step{
			{files: map[string]string{"web.yaml": v2}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{restart: true, files: map[string]string{"0-web.yaml": v1}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2", problems: "Replayed 0-web.yaml "},
		}},
		{"older version beside the newer one at a first start", []step{
			{files: map[string]string{"0-web.yaml": v1, "web.yaml": v2}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2",
				problems: "Replayed 0-web.yaml metadata.name"},
		}},
		{"newer version in a file after the pod's", []step{
			{files: map[string]string{"web.yaml": v2}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{files: map[string]string{"z-web.yaml": v3}, ops: "ADD web-node1 img:3\nREMOVE web-node1 img:2", pods: "web-node1 img:3",
				problems: "Replayed web.yaml metadata.name"},
		}},
		{"same serial in two files: the first by name", []step{
			{files: map[string]string{"0-web.yaml": v2b, "web.yaml": v2}, ops: "ADD web-node1 img:2b", pods: "web-node1 img:2b",
				problems: "DuplicateName web.yaml metadata.name"},
			{restart: true, ops: "ADD web-node1 img:2b", pods: "web-node1 img:2b", problems: "DuplicateName web.yaml metadata.name"},
		}},
		{"older ConfigMap under another name", []step{
			{files: map[string]string{"web.yaml": v2 + "---\n" + strings.SplitN(configMap(2, "2"), "\n", 2)[1]},
				ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{files: map[string]string{"0-cfg.yaml": configMap(1, "1")}, pods: "web-node1 img:2", problems: "Replayed 0-cfg.yaml "},
		}},
		{"broken signed edit keeps the running version", []step{
			{files: map[string]string{"web.yaml": v2}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{files: map[string]string{"web.yaml": signedBody(3, "", "web")}, pods: "web-node1 img:2", problems: "Invalid web.yaml items[0].spec.containers[0].image"},
			{restart: true, ops: "ADD web-node1 img:2", pods: "web-node1 img:2", problems: "Invalid web.yaml items[0].spec.containers[0].image"},
			{files: map[string]string{"0-web.yaml": v1}, pods: "web-node1 img:2", problems: "Replayed 0-web.yaml \nInvalid web.yaml items[0].spec.containers[0].image"},
		}},
		{"older version emptying its file", []step{
			{files: map[string]string{"web.yaml": v2}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{files: map[string]string{"web.yaml": signedBody(1, "")}, pods: "web-node1 img:2", problems: "Replayed web.yaml "},
		}},
		{"upgrade from serials per file keeps the current files", []step{
			{files: map[string]string{"web.yaml": v2}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{restart: true, legacy: true, ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{files: map[string]string{"0-web.yaml": v1}, pods: "web-node1 img:2", problems: "Replayed 0-web.yaml "},
		}},
		{"upgrade from serials per file protects the pods the files held", []step{
			{files: map[string]string{"web.yaml": v2}, ops: "ADD web-node1 img:2", pods: "web-node1 img:2"},
			{restart: true, legacy: true, files: map[string]string{"web.yaml": "", "0-web.yaml": v1}, problems: "Replayed 0-web.yaml "},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "manifests")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			stateDir := t.TempDir()
			cfg := Config{ManifestPath: dir, StateDir: stateDir, FileSigners: mustSigners(t, ops.Pub)}
			apply := func(files map[string]string) {
				for name, body := range files {
					p := filepath.Join(dir, name)
					if body == "" {
						for _, f := range []string{p, p + ".sig"} {
							if err := os.Remove(f); err != nil {
								t.Fatal(err)
							}
						}
						continue
					}
					renameIn(t, p+".sig", string(ops.Sign(t, []byte(body), SignatureNamespace)))
					renameIn(t, p, body)
				}
			}
			var src *startedSource
			var updates *opsLog
			start := func() {
				src = startSources(t, cfg)
				updates = drainUpdates(t, src.store)
			}
			for i, s := range tt.steps {
				switch {
				case i == 0:
					apply(s.files)
					start()
				case s.restart:
					src.stop()
					if s.legacy {
						toLegacySerials(t, stateDir)
					}
					apply(s.files)
					start()
				default:
					apply(s.files)
				}
				want := fmt.Sprintf("updates %q, pods %q, problems %q", s.ops, s.pods, s.problems)
				eventuallyEqual(t, fmt.Sprintf("step %d", i), want, func() string {
					return fmt.Sprintf("updates %q, pods %q, problems %q", updates.take(), podLines(src.store), problemsOf(src.store))
				})
				updates.reset()
			}
			if got := updates.take(); got != "" {
				t.Fatalf("updates after the last step: %q", got)
			}
		})
	}
}

// podLines renders the store's pods as sorted "name image" lines.
func podLines(s *store.Store) string {
	var lines []string
	for _, p := range s.Pods() {
		lines = append(lines, p.Name+" "+p.Spec.Containers[0].Image)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// opsLog collects a store's updates as "OP name image" lines.
type opsLog struct {
	mu    sync.Mutex
	lines []string
}

// take returns the lines collected since the last reset, sorted.
func (l *opsLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := slices.Clone(l.lines)
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (l *opsLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = nil
}

// drainUpdates reads the store's updates into an opsLog until the test
// ends.
func drainUpdates(t *testing.T, s *store.Store) *opsLog {
	l := &opsLog{}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case u := <-s.Updates():
				l.mu.Lock()
				for _, p := range u.Pods {
					l.lines = append(l.lines, fmt.Sprintf("%s %s %s", u.Op, p.Name, p.Spec.Containers[0].Image))
				}
				l.mu.Unlock()
				signal()
			case <-quit:
				return
			}
		}
	}()
	t.Cleanup(func() { close(quit); <-done })
	return l
}

// toLegacySerials rewrites the file source's serial state as an earlier
// berth kept it: one file per manifest file, nothing per pod.
func toLegacySerials(t *testing.T, stateDir string) {
	t.Helper()
	dir := filepath.Join(stateDir, "serials")
	data, err := os.ReadFile(filepath.Join(dir, "file.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return // already so
	}
	if err != nil {
		t.Fatal(err)
	}
	var sf struct {
		Origins map[string]struct{ Serial uint64 }
	}
	if err := json.Unmarshal(data, &sf); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "file.json")); err != nil {
		t.Fatal(err)
	}
	for origin, e := range sf.Origins {
		signaturetest.WriteLegacySerial(t, dir, podspec.SourceFile, origin, e.Serial)
	}
}

func mustSigners(t testing.TB, file string) *Signers {
	t.Helper()
	s, err := ParseAllowedSigners([]byte(file), "allowed_signers")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signatureFailures is berth_manifest_signature_failures_total{source,
// reason} in reg.
func signatureFailures(t *testing.T, reg *prometheus.Registry, source, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "berth_manifest_signature_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == source && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// signedBody is a signed PodList of the pods names, each running img, with
// serial on its first line.
func signedBody(serial int, img string, names ...string) string {
	var pods []string
	for _, n := range names {
		pods = append(pods, podspectest.Manifest(n, img))
	}
	return fmt.Sprintf("# berth.io/serial: %d\n", serial) + podspectest.List(pods...)
}

// noUpdate checks the store emitted nothing. It does not wait: callers
// first wait for the store to have merged the snapshot in question, and
// Apply queues its updates before it returns.
func noUpdate(t *testing.T, s *store.Store) {
	t.Helper()
	select {
	case u := <-s.Updates():
		t.Fatalf("unexpected update %s %v", u.Op, u.Pods[0].Name)
	default:
	}
}
