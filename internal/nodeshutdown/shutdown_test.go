package nodeshutdown

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func prioPod(name string, priority int32, grace int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Priority: &priority, TerminationGracePeriodSeconds: &grace}}
}

func TestShutdownPlan(t *testing.T) {
	pods := []*v1.Pod{
		prioPod("etcd", 2000001000, 30), prioPod("web", 0, 30), prioPod("api", 2000000000, 30),
		prioPod("batch", -5, 30), prioPod("db", 1000, 30), prioPod("app", 0, 30),
	}
	var got [][]string
	var critical []bool
	for _, g := range shutdownPlan(pods) {
		var names []string
		for _, p := range g.pods {
			names = append(names, p.Name)
		}
		got = append(got, names)
		critical = append(critical, g.critical)
	}
	want := [][]string{{"batch"}, {"app", "web"}, {"db"}, {"api"}, {"etcd"}}
	if len(got) != len(want) {
		t.Fatalf("plan = %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) || got[i][0] != want[i][0] || got[i][len(got[i])-1] != want[i][len(want[i])-1] {
			t.Fatalf("plan = %v, want %v", got, want)
		}
	}
	if critical[2] || !critical[3] || !critical[4] {
		t.Errorf("critical = %v, want the last two", critical)
	}
}

func TestPodGrace(t *testing.T) {
	for _, tt := range []struct {
		grace     int64
		remaining time.Duration
		want      int64
	}{{30, time.Minute, 30}, {30, 10 * time.Second, 10}, {30, 0, 1}, {0, time.Minute, 0}, {5, 1500 * time.Millisecond, 1}} {
		if got := podGrace(prioPod("p", 0, tt.grace), tt.remaining); got != tt.want {
			t.Errorf("podGrace(%d, %s) = %d, want %d", tt.grace, tt.remaining, got, tt.want)
		}
	}
}

// fakeLogind is logind without a bus: the lock is a pipe whose reading
// end sees EOF once berth closes its end.
type fakeLogind struct {
	mu       sync.Mutex
	maxDelay time.Duration
	raised   time.Duration
	locks    []*os.File // reading ends, one per Inhibit
	signals  chan bool
	closed   bool
}

func (f *fakeLogind) Inhibit(who, why string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.locks = append(f.locks, r)
	f.mu.Unlock()
	return w, nil
}

func (f *fakeLogind) MaxDelay() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxDelay, nil
}

func (f *fakeLogind) RaiseMaxDelay(d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.raised, f.maxDelay = d, d
	return nil
}

func (f *fakeLogind) PrepareForShutdown() <-chan bool { return f.signals }

func (f *fakeLogind) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// fakeTarget stops pods at once, or never for the names in stuck.
type fakeTarget struct {
	mu     sync.Mutex
	pods   []*v1.Pod
	stuck  map[string]bool
	order  []string
	graces map[string]int64
	down   map[types.UID]bool
	calls  chan string
}

func (f *fakeTarget) ActivePods() []*v1.Pod { return f.pods }

func (f *fakeTarget) Shutdown(uid types.UID, grace int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pods {
		if p.UID == uid {
			f.order = append(f.order, p.Name)
			f.graces[p.Name] = grace
			if !f.stuck[p.Name] {
				f.down[uid] = true
			}
			if f.calls != nil {
				f.calls <- p.Name
			}
		}
	}
}

func (f *fakeTarget) Stopped(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down[uid]
}

func TestShutdownManager(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	lg := &fakeLogind{maxDelay: 5 * time.Second, signals: make(chan bool)}
	target := &fakeTarget{
		pods:   []*v1.Pod{prioPod("etcd", 2000001000, 30), prioPod("web", 0, 30), prioPod("db", 1000, 5)},
		graces: map[string]int64{}, down: map[types.UID]bool{},
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	sm := &Manager{cfg: Config{GracePeriod: 30 * time.Second, CriticalPods: 10 * time.Second},
		dial: func() (logind, error) { return lg, nil }, pods: target, clock: clk, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sm.Run(ctx)
	}()
	lg.signals <- true // received only once the lock is held
	lg.mu.Lock()
	lock := lg.locks[0]
	raised := lg.raised
	lg.mu.Unlock()
	// The lock is released once every pod is stopped.
	if _, err := io.ReadAll(lock); err != nil {
		t.Fatal(err)
	}
	if raised != 30*time.Second {
		t.Errorf("logind's delay raised to %s, want 30s", raised)
	}
	target.mu.Lock()
	order, graces := target.order, target.graces
	target.mu.Unlock()
	if len(order) != 3 || order[0] != "web" || order[1] != "db" || order[2] != "etcd" {
		t.Errorf("stop order = %v, want web, db, etcd", order)
	}
	if graces["web"] != 20 || graces["db"] != 5 || graces["etcd"] != 10 {
		t.Errorf("graces = %v, want web 20 (30s less the critical 10s), db its own 5, etcd 10", graces)
	}
	// A cancelled shutdown takes the lock again.
	lg.signals <- false
	lg.signals <- false // handled after the first: the lock is back
	lg.mu.Lock()
	n := len(lg.locks)
	lg.mu.Unlock()
	if n != 2 {
		t.Errorf("locks taken = %d, want 2", n)
	}
	cancel()
	<-done
	if !lg.closed {
		t.Error("logind connection left open")
	}
}

// TestShutdownGroupTimesOut: a group whose pods do not stop within their
// share does not hold back the critical pods.
func TestShutdownGroupTimesOut(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{
			pods:   []*v1.Pod{prioPod("etcd", 2000001000, 30), prioPod("web", 0, 30)},
			stuck:  map[string]bool{"web": true},
			graces: map[string]int64{}, down: map[types.UID]bool{}, calls: make(chan string, 2),
		}
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		sm := &Manager{cfg: Config{GracePeriod: 30 * time.Second, CriticalPods: 10 * time.Second},
			pods: target, clock: clk, log: slog.New(slog.DiscardHandler)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			sm.stopPods(context.Background(), 30*time.Second)
		}()
		if got := <-target.calls; got != "web" {
			t.Fatalf("first stopped %s, want web", got)
		}
		// Step the clock past web's 20 s share, one poll at a time, each
		// once the bubble's goroutines are parked on it.
		for clk.Now().Before(time.Unix(1020, 0)) {
			synctest.Wait()
			if !clk.HasWaiters() {
				t.Fatalf("nothing waits on the clock at %v", clk.Now())
			}
			clk.Step(100 * time.Millisecond)
		}
		if got := <-target.calls; got != "etcd" {
			t.Fatalf("then stopped %s, want etcd", got)
		}
		<-done
		if g := target.graces["etcd"]; g != 10 {
			t.Errorf("etcd's grace = %d, want its 10 s share", g)
		}
	})
}

func TestShutdownWithoutLogind(t *testing.T) {
	sm := &Manager{cfg: Config{GracePeriod: time.Minute},
		dial: func() (logind, error) { return nil, errors.New("no system bus") }, log: slog.New(slog.DiscardHandler)}
	sm.Run(context.Background()) // returns at once: berth goes on without it
}
