package podspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podrules"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"k8s.io/apimachinery/pkg/api/equality"
)

// FuzzDecode feeds arbitrary bytes through the whole manifest pipeline. It
// must never panic, and what it accepts must be a complete static pod:
// named for the node, valid, stable under re-parsing and under defaulting
// again. The first line of the input also becomes a Secret's value, in
// each of secretValueTemplates: no problem may quote it.
func FuzzDecode(f *testing.F) {
	for _, tt := range parseCases {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(podspectest.ConfigMap + "---\n" + podspectest.Secret + "---\n" + podspectest.RefPod))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}, type: kubernetes.io/dockerconfigjson, data: {.dockerconfigjson: e30=}}\n"))
	f.Add([]byte(podspectest.Manifest("a", "nginx:1") + "    ports:\n    - {containerPort: 80, hostPort: 80}\n  tolerations:\n  - operator: Exists\n---\n" +
		podspectest.Manifest("b", "nginx:1") + "  hostNetwork: true\n  initContainers:\n  - {name: i, image: busybox:1, resizePolicy: [{resourceName: cpu, restartPolicy: NotRequired}]}\n"))
	for _, v := range []string{"pw", "!", ": x", " {a: b, a: c}", "&a [*a]", "\" \\x", "=="} {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSecretWithheld(t, data)
		res := Parse(data, webOrigin, podspectest.Node)
		for _, p := range res.Problems {
			if p.Origin != webOrigin.Path || p.Reason == "" || p.Message == "" {
				t.Fatalf("incomplete problem %+v", p)
			}
		}
		for _, o := range res.Objects {
			if (o.ConfigMap == nil) == (o.Secret == nil) || len(validateObject(&o)) > 0 || len(validateObjectKeyCount(&o)) > 0 || o.Meta().Namespace == "" {
				t.Fatalf("accepted an invalid object %+v", o)
			}
		}
		for _, w := range res.Warnings() {
			if w.Origin != webOrigin.Path || w.Reason != ReasonIgnoredField || w.Field == "" || !strings.HasPrefix(w.Message, "ignored: ") {
				t.Fatalf("incomplete warning %+v", w)
			}
		}
		// What podsnapshot's host-port clash check names: each claim's
		// field, at a line of the manifest.
		for i, pod := range res.Pods {
			for _, h := range podrules.HostPorts(pod) {
				if h.Field == "" || res.FieldPath(i, h.Field) == "" || res.HostPortLine(i, h.Field) < 0 {
					t.Fatalf("host-port claim %+v of %s has no field", h, pod.Name)
				}
			}
		}
		if len(res.Lines) != len(res.Pods) {
			t.Fatalf("%d lines for %d pods", len(res.Lines), len(res.Pods))
		}
		again := Parse(data, webOrigin, podspectest.Node)
		if len(again.Pods) != len(res.Pods) {
			t.Fatalf("re-parse accepted %d pods, first parse %d", len(again.Pods), len(res.Pods))
		}
		for i, pod := range res.Pods {
			if !strings.HasSuffix(pod.Name, "-"+podspectest.Node) || pod.Namespace == "" || pod.UID == "" || pod.Spec.NodeName != podspectest.Node {
				t.Fatalf("pod without static identity: %s/%s uid %q", pod.Namespace, pod.Name, pod.UID)
			}
			if again.Pods[i].UID != pod.UID {
				t.Fatalf("UID not stable: %s then %s", pod.UID, again.Pods[i].UID)
			}
			if errs := podrules.Validate(pod); len(errs) > 0 {
				t.Fatalf("accepted an invalid pod: %v", errs)
			}
			twice := pod.DeepCopy()
			podrules.Default(twice)
			if !equality.Semantic.DeepEqual(twice, pod) {
				t.Fatalf("defaulting is not idempotent for %s", pod.Name)
			}
		}
	})
}

// secretMarker starts the value checkSecretWithheld puts in a Secret;
// the rest of the value never holds a "~", so the marker is only where it
// was put.
const secretMarker = "S3cr3t~"

// secretValueTemplates put a value (%[1]s) where only a Secret's value can
// be: after a key on its own line or in a flow mapping, as an alias, with
// a tag. Whatever the value holds, it cannot become a key of the Secret's
// data (whose names problems may quote) or start another document.
var secretValueTemplates = []string{
	"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  password: %[1]s\n",
	"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n  password: %[1]s\n",
	"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  password: *%[1]s\n",
	"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  password: !!int %[1]s\n",
	"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  a: &a %[1]s\n  b: !!float *a\n",
	"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}, stringData: {password: %[1]s}}\n",
	"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n---\n" +
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  password: %[1]s\n",
}

// checkSecretWithheld puts the first line of data, after secretMarker, in
// each of secretValueTemplates and fails if a problem quotes the marker.
func checkSecretWithheld(t *testing.T, data []byte) {
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.Map(func(r rune) rune {
		switch r {
		case '~', '\r', '\u0085', '\u2028', '\u2029': // the marker's, and line breaks
			return -1
		}
		return r
	}, line)
	for _, tmpl := range secretValueTemplates {
		in := fmt.Sprintf(tmpl, secretMarker+line)
		for _, p := range Parse([]byte(in), webOrigin, podspectest.Node).Problems {
			if strings.Contains(p.Message+"\x00"+p.Field+"\x00"+p.Name, secretMarker) {
				t.Fatalf("a problem quotes a Secret's value:\n%s\n%+v", in, p)
			}
		}
	}
}
