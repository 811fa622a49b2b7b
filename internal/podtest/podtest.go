// Package podtest holds what the tests of the agent-side packages share:
// pods parsed the way the file and URL sources parse them, and a fake
// clock that runs timer callbacks as the real one does, and a log handler
// that signals one message (LogSignal).
//
// It owns nothing; it must never be imported by non-test code, and it
// imports only the Pod model. It keeps no mutable state.
package podtest

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podspec"
)

// Node is the node name the pods are parsed for.
const Node = "node1"

// FleetURL is the --manifest-url of the URL source's pods.
const FleetURL = "https://fleet.example/pods.yaml"

// Loop is a shell command that runs until SIGTERM.
const Loop = "trap 'exit 0' TERM; while true; do sleep 1; done"

// Parse parses a manifest the way the file source does; it must hold one pod.
func Parse(t *testing.T, path, yaml string) *v1.Pod {
	t.Helper()
	res := podspec.Parse([]byte(yaml), podspec.Origin{Source: podspec.SourceFile, Path: path}, Node)
	if len(res.Problems) > 0 || len(res.Pods) != 1 {
		t.Fatalf("manifest %s: %v", path, res.Problems)
	}
	return res.Pods[0]
}

// Simple is pod name of file /m/<name>.yaml, one container running command.
func Simple(t *testing.T, name, command string) *v1.Pod {
	return Parse(t, "/m/"+name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Always
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", %q]
`, name, command))
}

// HTTP parses a manifest the way the URL source does.
func HTTP(t *testing.T, yaml string) *v1.Pod {
	t.Helper()
	res := podspec.Parse([]byte(yaml), podspec.Origin{Source: podspec.SourceHTTP, Path: FleetURL}, Node)
	if len(res.Problems) > 0 || len(res.Pods) != 1 {
		t.Fatalf("manifest of %s: %v", FleetURL, res.Problems)
	}
	return res.Pods[0]
}

// NeverReadyManifest is a pod "web" whose init container never ends;
// marker makes versions of it differ.
func NeverReadyManifest(marker string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  initContainers: [{name: wait, image: busybox:1.36, command: [sleep, "3600"]}]
  containers: [{name: app, image: busybox:1.36, command: [sleep, "3600` + marker + `"]}]
`
}

// ConditionTrue reports whether st has condition typ, True.
func ConditionTrue(st v1.PodStatus, typ v1.PodConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// Stub is a pod of one container with the given UID, name (in namespace
// default) and resource version, without a manifest.
func Stub(uid types.UID, name, version string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: uid, Name: name, Namespace: "default", ResourceVersion: version},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app", Image: "busybox:1.36"}}},
	}
}
