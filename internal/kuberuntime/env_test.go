package kuberuntime

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// criTestEnv is a Manager over the cri-api fakes, a fake clock and a
// recorder that keeps events, for the image, kill and removal tests.
type criTestEnv struct {
	m      *Manager
	rs     *fakeapi.FakeRuntimeService
	is     *fakeapi.FakeImageService
	clock  *clocktesting.FakeClock
	events *eventLog
}

func newCRITestEnv(t *testing.T) *criTestEnv {
	t.Helper()
	env := &criTestEnv{
		rs:     fakeapi.NewFakeRuntimeService(),
		is:     fakeapi.NewFakeImageService(),
		clock:  clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)),
		events: &eventLog{},
	}
	env.is.SetFakeImageSize(1234)
	env.m = NewManager(env.rs, env.is, Options{Clock: env.clock, Recorder: env.events, PodLogsDir: t.TempDir()})
	return env
}

// calls returns the runtime calls made since the last calls.
func (e *criTestEnv) calls() []string {
	e.rs.Lock()
	defer e.rs.Unlock()
	c := e.rs.Called
	e.rs.Called = nil
	return c
}

// eventLog is a Recorder keeping "Type Reason: message" lines.
type eventLog struct {
	mu     sync.Mutex // guards events
	events []string
}

func (l *eventLog) Event(_ types.UID, _, _ string, typ EventType, reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s: %s", typ, reason, message))
}

// take returns the events recorded since the last take.
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events
	l.events = nil
	return e
}
