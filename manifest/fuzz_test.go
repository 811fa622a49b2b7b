package manifest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
)

// FuzzDecode feeds arbitrary bytes through the whole manifest pipeline. It
// must never panic, and what it accepts must be a complete static pod:
// named for the node, valid, stable under re-parsing and under defaulting
// again.
func FuzzDecode(f *testing.F) {
	for _, tt := range parseCases {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(cmFiles + "---\n" + secretDB + "---\n" + refPod))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}, type: kubernetes.io/dockerconfigjson, data: {.dockerconfigjson: e30=}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res := Parse(data, webOrigin, testNode)
		for _, p := range res.Problems {
			if p.Origin != webOrigin.Path || p.Reason == "" || p.Message == "" {
				t.Fatalf("incomplete problem %+v", p)
			}
		}
		for _, o := range res.Objects {
			if (o.ConfigMap == nil) == (o.Secret == nil) || len(validateObject(&o)) > 0 || o.Meta().Namespace == "" {
				t.Fatalf("accepted an invalid object %+v", o)
			}
		}
		if len(res.Lines) != len(res.Pods) {
			t.Fatalf("%d lines for %d pods", len(res.Lines), len(res.Pods))
		}
		again := Parse(data, webOrigin, testNode)
		if len(again.Pods) != len(res.Pods) {
			t.Fatalf("re-parse accepted %d pods, first parse %d", len(again.Pods), len(res.Pods))
		}
		for i, pod := range res.Pods {
			if !strings.HasSuffix(pod.Name, "-"+testNode) || pod.Namespace == "" || pod.UID == "" || pod.Spec.NodeName != testNode {
				t.Fatalf("pod without static identity: %s/%s uid %q", pod.Namespace, pod.Name, pod.UID)
			}
			if again.Pods[i].UID != pod.UID {
				t.Fatalf("UID not stable: %s then %s", pod.UID, again.Pods[i].UID)
			}
			if errs := validatePod(pod); len(errs) > 0 {
				t.Fatalf("accepted an invalid pod: %v", errs)
			}
			twice := pod.DeepCopy()
			setDefaults(twice)
			if !equality.Semantic.DeepEqual(twice, pod) {
				t.Fatalf("defaulting is not idempotent for %s", pod.Name)
			}
		}
	})
}
