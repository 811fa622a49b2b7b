//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestBrokenManifest puts broken manifests next to a good one: the good
// pod runs, berth becomes ready, and /pods lists each broken one as a
// Failed pod whose reason is set and whose message names the file and the
// line of the fault. No broken pod gets a sandbox.
func TestBrokenManifest(t *testing.T) {
	header := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: main\n    image: busybox:1.36\n"
	tests := []struct {
		name string
		tail string // lines 9 and on; line 9 is the fault
	}{
		{name: "bad-value", tail: "    imagePullPolicy: Sometimes\n"},
		{name: "bad-field", tail: "    imagePullPolice: Never\n"},
		{name: "bad-type", tail: "    command: sh -c true\n"},
	}
	manifests := map[string]string{"good.yaml": podManifest(sleeper("good"))}
	for _, tc := range tests {
		manifests[tc.name+".yaml"] = fmt.Sprintf(header, tc.name) + tc.tail
	}
	b := newBerth(t, berthOptions{manifests: manifests})
	b.waitReady()
	good := b.waitRunning(podName("good"))
	b.waitRuntime(podName("good"), "main", good.UID)

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer b.use(t)()
			name := podName(tc.name)
			p := b.waitPod(name, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			t.Logf("%s: reason %q, message %q", name, p.Status.Reason, p.Status.Message)
			if p.Status.Reason == "" {
				t.Errorf("no reason: %s", describePod(p))
			}
			if want := b.manifestPath(tc.name+".yaml") + ":9"; !strings.Contains(p.Status.Message, want) {
				t.Errorf("message %q does not name the file and line %s", p.Status.Message, want)
			}
			if podReady(p) {
				t.Errorf("a rejected pod is Ready")
			}
			sbs, err := sandboxesOf(name)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := containersOf(name)
			if err != nil {
				t.Fatal(err)
			}
			if len(sbs)+len(cs) > 0 {
				t.Errorf("the broken pod has runtime objects: %s %s", describeSandboxes(sbs), describeContainers(cs))
			}
		})
	}
}
