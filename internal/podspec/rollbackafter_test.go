package podspec

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podrules"
)

// TestRollbackAfterAnnotation: berth.io/rollback-after is a duration or
// 0; anything else refuses the manifest with its file, line and field.
func TestRollbackAfterAnnotation(t *testing.T) {
	tests := []struct {
		value   string
		want    time.Duration
		problem string
	}{
		{value: "5m", want: 5 * time.Minute},
		{value: "90s", want: 90 * time.Second},
		{value: "0", want: 0},
		{value: "0s", want: 0},
		{value: "-1m", problem: "negative"},
		{value: "soon", problem: "not a duration"},
		{value: "5", problem: "not a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    berth.io/rollback-after: \"" + tt.value + "\"\nspec:\n  containers: [{name: app, image: busybox:1.36}]\n"
			res := Parse([]byte(doc), Origin{Source: SourceFile, Path: "/m/web.yaml"}, "node1")
			if tt.problem != "" {
				if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Error(), "metadata.annotations[berth.io/rollback-after]") ||
					!strings.Contains(res.Problems[0].Error(), tt.problem) || res.Problems[0].Line == 0 {
					t.Fatalf("problems %v, want one at a line naming the annotation and saying %q", res.Problems, tt.problem)
				}
				return
			}
			if len(res.Problems) > 0 || len(res.Pods) != 1 {
				t.Fatalf("problems %v", res.Problems)
			}
			d, ok, err := podrules.RollbackAfter(res.Pods[0])
			if !ok || err != nil || d != tt.want {
				t.Errorf("RollbackAfter = %v, %v, %v; want %v", d, ok, err, tt.want)
			}
		})
	}
}
