package podspec

import (
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

func TestValidateObjectRefs(t *testing.T) {
	pod := func(extra string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i\n" + extra
	}
	tests := []struct {
		name string
		in   string
		want []string // "LINE FIELD REASON"
	}{
		{"defaults and items are fine", pod("  volumes:\n  - name: v\n    configMap: {name: a, items: [{key: k, path: sub/f, mode: 0600}]}\n"), nil},
		{"defaultMode too large", pod("  volumes:\n  - name: v\n    secret: {secretName: s, defaultMode: 01000}\n"),
			[]string{"10 spec.volumes[0].secret.defaultMode Invalid"}},
		{"item path leaves the volume", pod("  volumes:\n  - name: v\n    configMap: {name: a, items: [{key: k, path: ../f}]}\n"),
			[]string{"10 spec.volumes[0].configMap.items[0].path Invalid"}},
		{"absolute item path", pod("  volumes:\n  - name: v\n    configMap: {name: a, items: [{key: k, path: /f}]}\n"),
			[]string{"10 spec.volumes[0].configMap.items[0].path Invalid"}},
		{"no name", pod("  volumes:\n  - name: v\n    secret: {}\n"),
			[]string{"10 spec.volumes[0].secret.secretName Invalid"}},
		{"key selector without a key", pod("    env:\n    - name: A\n      valueFrom:\n        configMapKeyRef: {name: a}\n"),
			[]string{"11 spec.containers[0].env[0].valueFrom.configMapKeyRef.key Invalid"}},
		{"key selector with a bad key", pod("    env:\n    - name: A\n      valueFrom:\n        secretKeyRef: {name: a, key: 'x/y'}\n"),
			[]string{"11 spec.containers[0].env[0].valueFrom.secretKeyRef.key Invalid"}},
		{"envFrom with both", pod("    envFrom:\n    - {configMapRef: {name: a}, secretRef: {name: b}}\n"),
			[]string{"9 spec.containers[0].envFrom[0] Invalid"}},
		{"envFrom with neither", pod("    envFrom:\n    - {prefix: X_}\n"),
			[]string{"9 spec.containers[0].envFrom[0] Invalid"}},
		{"envFrom with a bad prefix", pod("    envFrom:\n    - {prefix: 'A=', configMapRef: {name: a}}\n"),
			[]string{"9 spec.containers[0].envFrom[0].prefix Invalid"}},
		{"pull secret without a name", pod("  imagePullSecrets: [{}]\n"),
			[]string{"8 spec.imagePullSecrets[0].name Invalid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Parse([]byte(tt.in), webOrigin, podspectest.Node)
			got := problemLines(res.Problems)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s\nfull: %v", strings.Join(got, "\n"), strings.Join(tt.want, "\n"), res.Problems)
			}
		})
	}
}
