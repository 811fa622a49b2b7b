package gc

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podpath/podpathtest"
	"github.com/berth-agent/berth/internal/podplan"
)

// TestRemovePodDirsStaysInsideRoots: removing the directories of a pod
// whose identity climbs out of the roots (as a runtime's labels could
// carry it) touches nothing outside them. It is the GC half of cri's
// TestHostilePodFieldsStayInsideRoots.
func TestRemovePodDirsStaysInsideRoots(t *testing.T) {
	tests := []struct{ name, namespace, pod, uid string }{
		{"uid", "prod", "web", "../../victim"},
		{"uid with a newline", "prod", "web", "a\n../../../victim"},
		{"namespace", "../victim", "web", "u"},
		{"name", "prod", "../../victim", "u"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := podpathtest.NewVictimBed(t)
			env := newGCTestEnvIn(t, b.Root, b.Logs)
			uid := types.UID(tt.uid)
			if _, err := env.gc.removePodDirs(uid, env.m.PodLogDir(&podplan.PodStatus{UID: uid, Name: tt.pod, Namespace: tt.namespace})); err != nil {
				t.Errorf("removePodDirs: %v", err)
			}
			b.Check(t)
		})
	}
}
