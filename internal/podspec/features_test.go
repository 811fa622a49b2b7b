package podspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
	v1 "k8s.io/api/core/v1"
)

// featureCases are the fields of Kubernetes 1.34-1.36 berth honours:
// fileKeyRef (KEP-3721), image volumes (KEP-4639) and hostUsers (user
// namespaces), each accepted as the API server would and refused with the
// line and field where it would refuse.
var featureCases = []struct {
	name      string
	in        string
	wantProbs []string // "line field reason" (the stage's reason: Invalid)
	wantMsg   string   // a substring of the first problem
}{
	{
		name: "fileKeyRef from an emptyDir",
		in: `apiVersion: v1
kind: Pod
metadata: {name: envfile}
spec:
  initContainers:
  - {name: setup, image: busybox, volumeMounts: [{name: cfg, mountPath: /data}]}
  containers:
  - name: app
    image: busybox
    env:
    - name: DB
      valueFrom:
        fileKeyRef: {volumeName: cfg, path: sub/config.env, key: DB_ADDRESS, optional: true}
  volumes:
  - {name: cfg, emptyDir: {}}
`,
	},
	{
		name: "fileKeyRef mistakes",
		in: `apiVersion: v1
kind: Pod
metadata: {name: envfile}
spec:
  containers:
  - name: app
    image: busybox
    env:
    - name: A
      valueFrom:
        fileKeyRef: {volumeName: host, path: /etc/config.env, key: "A=B"}
    - name: B
      valueFrom:
        fileKeyRef: {volumeName: nope, path: ../x.env, key: ""}
    - name: C
      valueFrom:
        fileKeyRef:
          volumeName: ""
          path: ""
          key: ` + strings.Repeat("K", 129) + `
  volumes:
  - {name: host, hostPath: {path: /etc}}
`,
		wantProbs: []string{
			"11 spec.containers[0].env[0].valueFrom.fileKeyRef.volumeName Invalid",
			"11 spec.containers[0].env[0].valueFrom.fileKeyRef.path Invalid",
			"11 spec.containers[0].env[0].valueFrom.fileKeyRef.key Invalid",
			"14 spec.containers[0].env[1].valueFrom.fileKeyRef.volumeName Invalid",
			"14 spec.containers[0].env[1].valueFrom.fileKeyRef.path Invalid",
			"14 spec.containers[0].env[1].valueFrom.fileKeyRef.key Invalid",
			"18 spec.containers[0].env[2].valueFrom.fileKeyRef.volumeName Invalid",
			"19 spec.containers[0].env[2].valueFrom.fileKeyRef.path Invalid",
			"20 spec.containers[0].env[2].valueFrom.fileKeyRef.key Invalid",
		},
		wantMsg: `web.yaml:11: spec.containers[0].env[0].valueFrom.fileKeyRef.volumeName: Invalid value: "host": must name an emptyDir volume`,
	},
	{
		name: "image volume",
		in: `apiVersion: v1
kind: Pod
metadata: {name: imgvol}
spec:
  containers:
  - {name: app, image: busybox, volumeMounts: [{name: data, mountPath: /data}]}
  volumes:
  - {name: data, image: {reference: "registry.example/data:1.0"}}
`,
	},
	{
		name: "image volume mistakes",
		in: `apiVersion: v1
kind: Pod
metadata: {name: imgvol}
spec:
  containers:
  - {name: app, image: busybox}
  volumes:
  - {name: a, image: {}}
  - {name: b, image: {reference: " x:1", pullPolicy: Sometimes}}
`,
		wantProbs: []string{
			"8 spec.volumes[0].image.reference Invalid",
			"9 spec.volumes[1].image.reference Invalid",
			"9 spec.volumes[1].image.pullPolicy Invalid",
		},
	},
	{
		name: "hostUsers false",
		in: `apiVersion: v1
kind: Pod
metadata: {name: userns}
spec:
  hostUsers: false
  containers:
  - {name: app, image: busybox}
`,
	},
	{
		name: "hostUsers false with host namespaces",
		in: `apiVersion: v1
kind: Pod
metadata: {name: userns}
spec:
  hostUsers: false
  hostNetwork: true
  hostPID: true
  hostIPC: true
  containers:
  - {name: app, image: busybox}
`,
		wantProbs: []string{
			"6 spec.hostNetwork Invalid",
			"7 spec.hostPID Invalid",
			"8 spec.hostIPC Invalid",
		},
		wantMsg: "spec.hostNetwork: Forbidden: not allowed when hostUsers is false",
	},
}

func TestParseFeatures(t *testing.T) {
	for _, tt := range featureCases {
		t.Run(tt.name, func(t *testing.T) {
			res := Parse([]byte(tt.in), webOrigin, podspectest.Node)
			var probs []string
			for _, p := range res.Problems {
				probs = append(probs, fmt.Sprintf("%d %s %s", p.Line, p.Field, p.Reason))
			}
			if strings.Join(probs, "\n") != strings.Join(tt.wantProbs, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s\nfull: %v", strings.Join(probs, "\n"), strings.Join(tt.wantProbs, "\n"), res.Problems)
			}
			if len(tt.wantProbs) == 0 && len(res.Pods) != 1 {
				t.Errorf("pods = %d, want the pod accepted", len(res.Pods))
			}
			if tt.wantMsg != "" && (len(res.Problems) == 0 || !strings.Contains(res.Problems[0].Error(), tt.wantMsg)) {
				t.Errorf("first problem %v does not contain %q", res.Problems, tt.wantMsg)
			}
		})
	}
}

func TestImageVolumeDefaults(t *testing.T) {
	for ref, want := range map[string]v1.PullPolicy{
		"data":        v1.PullAlways,
		"data:latest": v1.PullAlways,
		"data:1.0":    v1.PullIfNotPresent,
		"data@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": v1.PullIfNotPresent,
	} {
		pod := parseOne(t, `apiVersion: v1
kind: Pod
metadata: {name: imgvol}
spec:
  containers:
  - {name: app, image: busybox}
  volumes:
  - {name: data, image: {reference: "`+ref+`"}}
`, webOrigin, podspectest.Node)
		if got := pod.Spec.Volumes[0].Image.PullPolicy; got != want {
			t.Errorf("pullPolicy of %s = %s, want %s", ref, got, want)
		}
	}
}
