package kuberuntime

import (
	"context"
	"slices"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
)

// TestEnsureImageWaitsForImport: a missing image waits for the imports in
// progress; it is then used if an import brought it (no pull, even with
// policy Never), or pulled or refused as usual if none did; with nothing
// pending the preloads cost nothing.
func TestEnsureImageWaitsForImport(t *testing.T) {
	tests := []struct {
		name      string
		policy    v1.PullPolicy
		pending   bool
		imports   bool // the import brings the image
		wantRef   string
		wantPull  bool
		wantErr   string
		wantEvent bool
	}{
		{name: "Never, imported", policy: v1.PullNever, pending: true, imports: true, wantRef: "example.com/app:1", wantEvent: true},
		{name: "IfNotPresent, imported", policy: v1.PullIfNotPresent, pending: true, imports: true, wantRef: "example.com/app:1", wantEvent: true},
		{name: "IfNotPresent, not in the import", policy: v1.PullIfNotPresent, pending: true, wantRef: "example.com/app:1", wantPull: true, wantEvent: true},
		{name: "Never, not in the import", policy: v1.PullNever, pending: true, wantErr: ReasonErrImageNeverPull, wantEvent: true},
		{name: "nothing pending", policy: v1.PullNever, wantErr: ReasonErrImageNeverPull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := fakeapi.NewFakeImageService()
			events := &importRecorder{waiting: make(chan struct{})}
			done := make(chan struct{})
			var pending <-chan struct{}
			if tt.pending {
				pending = done
			}
			m := NewManager(fakeapi.NewFakeRuntimeService(), is, Options{Recorder: events, PodLogsDir: t.TempDir(),
				PendingImport: func() <-chan struct{} {
					select {
					case <-done:
						return nil
					default:
						return pending
					}
				}})
			// The import ends, with or without the image, once the pod
			// waits for it.
			if tt.pending {
				go func() {
					<-events.waiting
					if tt.imports {
						is.SetFakeImages([]string{"example.com/app:1"})
					}
					close(done)
				}()
			}
			pod, c := imagePod("example.com/app:1", tt.policy)
			img, err := m.EnsureImage(context.Background(), pod, c, nil)
			if got := syncReason(err); got != tt.wantErr || (err != nil && tt.wantErr == "") {
				t.Fatalf("err = %v, want reason %q", err, tt.wantErr)
			}
			if img.Ref != tt.wantRef {
				t.Errorf("ref = %q, want %q", img.Ref, tt.wantRef)
			}
			if pulled := slices.Contains(is.Called, "PullImage"); pulled != tt.wantPull {
				t.Errorf("pulled = %v, want %v", pulled, tt.wantPull)
			}
			if got := events.reasons(); slices.Contains(got, ReasonWaitingForImport) != (tt.wantEvent) {
				t.Errorf("events %v, want WaitingForImport: %v", got, tt.wantEvent)
			}
		})
	}
}

// importRecorder keeps the events' reasons and closes waiting at the
// first WaitingForImport.
type importRecorder struct {
	mu      sync.Mutex // guards seen
	seen    []string
	waiting chan struct{}
}

func (r *importRecorder) Event(_ types.UID, _, _ string, _ EventType, reason, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reason == ReasonWaitingForImport && !slices.Contains(r.seen, reason) {
		close(r.waiting)
	}
	r.seen = append(r.seen, reason)
}

func (r *importRecorder) reasons() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}
