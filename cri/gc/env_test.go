package gc

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/cri"
)

// gcTestEnv is a Collector and the runtime manager whose relists feed it,
// over the cri-api fakes and a fake clock, with root and log directories
// of their own.
type gcTestEnv struct {
	m          *cri.Manager
	gc         *Collector
	rs         *fakeapi.FakeRuntimeService
	is         *fakeapi.FakeImageService
	clock      *clocktesting.FakeClock
	root, logs string
}

func newGCTestEnv(t *testing.T) *gcTestEnv {
	t.Helper()
	return newGCTestEnvIn(t, t.TempDir(), t.TempDir())
}

// newGCTestEnvIn is newGCTestEnv over the given root and log directories.
func newGCTestEnvIn(t *testing.T, root, logs string) *gcTestEnv {
	t.Helper()
	env := &gcTestEnv{
		rs:    fakeapi.NewFakeRuntimeService(),
		is:    fakeapi.NewFakeImageService(),
		clock: clocktesting.NewFakeClock(baseTime),
		root:  root,
		logs:  logs,
	}
	env.is.SetFakeImageSize(1234)
	env.m = cri.NewManager(env.rs, env.is, cri.Options{Clock: env.clock, RootDir: root, PodLogsDir: logs})
	env.gc = New(env.rs, env.is, env.m, Options{Clock: env.clock, RootDir: root, PodLogsDir: logs})
	return env
}

// calls returns the runtime calls made since the last calls.
func (e *gcTestEnv) calls() []string {
	e.rs.Lock()
	defer e.rs.Unlock()
	c := e.rs.Called
	e.rs.Called = nil
	return c
}

var baseTime = time.Unix(1_700_000_000, 0)

// podLabels are the labels berth puts on a pod's objects.
func podLabels(uid, name string) map[string]string {
	return map[string]string{
		cri.LabelPodUID: uid, cri.LabelPodName: name, cri.LabelPodNamespace: "default", cri.LabelManaged: "true",
	}
}

// fakeSandbox is a ready sandbox of pod uid, created at baseTime+created.
func fakeSandbox(id, uid string, created time.Duration) *fakeapi.FakePodSandbox {
	return &fakeapi.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id:        id,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web-node", Namespace: "default", Uid: uid},
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: baseTime.Add(created).UnixNano(),
		Network:   &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.2"},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: runtimeapi.NamespaceMode_POD,
		}}},
		Labels: podLabels(uid, "web-node"),
	}}
}

// mustPath unwraps a path helper's result, failing the test on error.
func mustPath(t *testing.T) func(string, error) string {
	return func(p string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// victimBed is a temporary directory holding berth's root and log
// directories and, next to them, a victim directory with a few files: what
// a hostile runtime object must never make GC reach.
type victimBed struct {
	base, root, logs, victim string
	want                     []string // the victim's tree, as victimTree lists it
}

func newVictimBed(t *testing.T) *victimBed {
	t.Helper()
	base := t.TempDir()
	b := &victimBed{base: base, root: filepath.Join(base, "root"), logs: filepath.Join(base, "logs"), victim: filepath.Join(base, "victim")}
	for _, d := range []string{b.root, b.logs, filepath.Join(b.victim, "containers", "app")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"keep", "containers/app/msg"} {
		if err := os.WriteFile(filepath.Join(b.victim, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b.want = b.victimTree(t)
	return b
}

// victimTree lists every entry of the victim directory with its mode.
func (b *victimBed) victimTree(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(b.victim, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v", strings.TrimPrefix(path, b.base), fi.Mode()))
		return nil
	})
	if err != nil {
		t.Errorf("victim directory: %v", err)
	}
	return out
}

// check fails the test when anything but root, logs and victim appeared
// next to them, or anything in victim changed.
func (b *victimBed) check(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(b.base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := e.Name(); n != "root" && n != "logs" && n != "victim" {
			t.Errorf("%s created next to the roots", n)
		}
	}
	if got := b.victimTree(t); !slices.Equal(got, b.want) {
		t.Errorf("victim directory changed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(b.want, "\n"))
	}
}
