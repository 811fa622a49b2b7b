package doctor

import (
	"testing"

	apitest "k8s.io/cri-api/pkg/apis/testing"
)

// TestCheckPauseImage: the sandbox image the runtime reports (or
// Options.PauseImage) must be present.
func TestCheckPauseImage(t *testing.T) {
	tests := []struct {
		name    string
		config  map[string]any
		option  string
		present []string
		down    bool
		want    Status
		wantIn  string
	}{
		{"present", map[string]any{"sandboxImage": "registry.k8s.io/pause:3.9"}, "", []string{"registry.k8s.io/pause:3.9"}, false, OK, "sandbox image registry.k8s.io/pause:3.9 is present"},
		{"missing", map[string]any{"sandboxImage": "registry.k8s.io/pause:3.9"}, "", nil, false, Warn, "is not present: the runtime pulls it with the first pod"},
		{"not reported", nil, "", nil, false, Warn, "does not report its sandbox (pause) image"},
		{"named by the options", nil, "example.com/pause:1", []string{"example.com/pause:1"}, false, OK, "example.com/pause:1 is present"},
		{"runtime down", nil, "", nil, true, Warn, "not checked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rt *fakeRuntime
			if !tt.down {
				rt = newFakeRuntime(tt.config)
			}
			img := &fakeImages{FakeImageService: apitest.NewFakeImageService()}
			img.SetFakeImages(tt.present)
			e := testEnv(t, rt, img, Options{PauseImage: tt.option})
			checkResult(t, e.checkPauseImage(t.Context(), askedRuntime(t, e)), tt.want, tt.wantIn)
		})
	}
}
