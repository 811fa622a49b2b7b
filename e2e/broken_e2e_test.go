//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestBrokenManifest puts broken manifests next to a good one: the good
// pod runs, berth becomes ready, and /pods lists each broken one as a
// Failed pod whose reason is set and whose message names the file and the
// line of the fault. No broken pod gets a sandbox. A ConfigMap with more
// keys than berth allows is a problem naming its file, line and field,
// and the pod using it does not start.
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
	// Line 5 is the fault: 1001 keys under data.
	var keys strings.Builder
	for i := range 1001 {
		fmt.Fprintf(&keys, "  k%d: v\n", i)
	}
	many := sleeper("many")
	many.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "many"}}}}
	manifests["too-many-keys.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: many\ndata:\n" + keys.String() + "---\n" + podManifest(many)
	const otherProblems = 2 // too-many-keys.yaml: the ConfigMap and the pod using it
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

	t.Run("too-many-keys", func(t *testing.T) {
		defer b.use(t)()
		b.waitProblem("Invalid", "too-many-keys.yaml")
		code, body, err := b.getUnix("/problems")
		if err != nil || code != 200 {
			t.Fatalf("/problems: %d %v", code, err)
		}
		var list struct{ Items []struct{ Error string } }
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		want := b.manifestPath("too-many-keys.yaml") + `:5: data: ConfigMap "many": Forbidden: 1001 keys, more than the 1000`
		found := false
		for _, p := range list.Items {
			found = found || strings.HasPrefix(p.Error, want)
		}
		if !found {
			t.Errorf("/problems has no problem starting %q:\n%s", want, body)
		}
		if sbs, err := sandboxesOf(podName("many")); err != nil || len(sbs) > 0 {
			t.Errorf("the pod using the refused ConfigMap has sandboxes: %v %s", err, describeSandboxes(sbs))
		}
	})

	// The operator finds each problem in berth's log, with file and line.
	t.Run("logged", func(t *testing.T) {
		data, _ := os.ReadFile(b.logFile)
		for _, tc := range tests {
			path := b.manifestPath(tc.name + ".yaml")
			found := false
			for _, line := range strings.Split(string(data), "\n") {
				if strings.Contains(line, path+":9") || strings.Contains(line, path) && strings.Contains(line, "line=9") {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("berth's log has no line naming %s and line 9", path)
			}
		}
	})

	// A running pod whose manifest is edited into a broken one keeps its
	// last good version running: same uid, same container.
	t.Run("broken-edit", func(t *testing.T) {
		defer b.use(t)()
		before := b.waitRuntime(podName("good"), "main", good.UID)
		b.writeManifest("good.yaml", fmt.Sprintf(header, "good")+tests[0].tail)
		// berth has seen the edit when it counts one more manifest problem.
		b.waitFor("berth_manifest_problems to count the broken edit", waitTimeout, func() (bool, string) {
			n, err := b.manifestProblems()
			return n == len(tests)+otherProblems+1, fmt.Sprintf("%d problems (%v)", n, err)
		})
		time.Sleep(3 * time.Second) // relists, housekeeping
		now, ok, detail := runtimeState(podName("good"), "main", good.UID)
		if !ok || now.container.Id != before.container.Id {
			t.Errorf("after a broken edit the last good pod is not left running: %s (container %s, was %s)", detail, shortID(now.container.GetId()), shortID(before.container.Id))
		}
		p, err := b.apiPod(podName("good"))
		if err != nil || p == nil || p.UID != good.UID || p.Status.Phase != v1.PodRunning {
			t.Errorf("/pods after a broken edit: %v %v", err, p)
		}
	})

	// The broken edit shows on the pod itself, not only in /problems: its
	// berth.io/ManifestValid condition is False with the file and line,
	// berth pods says ManifestInvalid and berth describe gives the
	// message; for a rejected field (the problem names the pod) and a YAML
	// syntax error (it cannot). Restoring the file clears it, without
	// touching the running container.
	t.Run("broken-edit-on-the-pod", func(t *testing.T) {
		defer b.use(t)()
		path := b.manifestPath("good.yaml")
		before := b.waitRuntime(podName("good"), "main", good.UID)
		for _, edit := range []struct {
			name, content, reason string
			line                  int
		}{
			{"rejected field", fmt.Sprintf(header, "good") + tests[0].tail, "Invalid", 9},
			{"YAML syntax error", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: good\nspec:\n  containers:\n  - name: main\n   image: busybox:1.36\n", "DecodeError", 0},
		} {
			b.writeManifest("good.yaml", edit.content)
			c := b.waitManifestValid(podName("good"), v1.ConditionFalse, edit.reason)
			t.Logf("%s: condition %s %s %q", edit.name, c.Status, c.Reason, c.Message)
			want := regexp.MustCompile("^" + regexp.QuoteMeta(path) + `:(\d+): `)
			m := want.FindStringSubmatch(c.Message)
			if m == nil || (edit.line > 0 && m[1] != strconv.Itoa(edit.line)) {
				t.Errorf("%s: condition message %q, want %s:%d: ...", edit.name, c.Message, path, edit.line)
			}
			out, err := exec.Command(berthBin, "pods", "--socket", b.socket).CombinedOutput()
			if err != nil || !regexp.MustCompile(`(?m)^`+podName("good")+`\s+1/1\s+ManifestInvalid\s`).Match(out) {
				t.Errorf("%s: berth pods (%v) does not show good as 1/1 ManifestInvalid:\n%s", edit.name, err, out)
			}
			out, err = exec.Command(berthBin, "describe", "good", "--socket", b.socket).CombinedOutput()
			if err != nil || !regexp.MustCompile(`berth.io/ManifestValid\s+False\s+`+edit.reason+`: `+regexp.QuoteMeta(c.Message)).Match(out) {
				t.Errorf("%s: berth describe good (%v) does not show the condition with its message:\n%s", edit.name, err, out)
			}
		}

		b.writeManifest("good.yaml", podManifest(sleeper("good")))
		b.waitManifestValid(podName("good"), v1.ConditionTrue, "")
		out, err := exec.Command(berthBin, "pods", "--socket", b.socket).CombinedOutput()
		if err != nil || !regexp.MustCompile(`(?m)^`+podName("good")+`\s+1/1\s+Running\s`).Match(out) {
			t.Errorf("after the fix berth pods (%v) does not show good as 1/1 Running:\n%s", err, out)
		}
		now, ok, detail := runtimeState(podName("good"), "main", good.UID)
		if !ok || now.container.Id != before.container.Id {
			t.Errorf("the running container changed across broken edits and the fix: %s", detail)
		}
	})
}

// waitManifestValid waits until /pods/default/NAME (over the socket) shows
// the pod's berth.io/ManifestValid condition with status and reason, and
// returns the condition.
func (b *berth) waitManifestValid(name string, status v1.ConditionStatus, reason string) v1.PodCondition {
	b.t.Helper()
	var got v1.PodCondition
	b.waitFor(fmt.Sprintf("pod %s: berth.io/ManifestValid %s %s", name, status, reason), waitTimeout, func() (bool, string) {
		code, body, err := b.getUnix("/pods/default/" + name)
		if err != nil || code != 200 {
			return false, fmt.Sprintf("%d %v %.200s", code, err, body)
		}
		var p v1.Pod
		if err := json.Unmarshal(body, &p); err != nil {
			return false, err.Error()
		}
		c := podCondition(&p, "berth.io/ManifestValid")
		if c == nil {
			return false, "no berth.io/ManifestValid condition: " + describePod(&p)
		}
		got = *c
		return c.Status == status && c.Reason == reason, fmt.Sprintf("%s %s %q", c.Status, c.Reason, c.Message)
	})
	return got
}

// manifestProblems sums the berth_manifest_problems gauge of /metrics.
func (b *berth) manifestProblems() (int, error) {
	code, body := b.status("/metrics")
	if code != 200 {
		return 0, fmt.Errorf("/metrics: %d %.200s", code, body)
	}
	n := 0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "berth_manifest_problems{") && !strings.HasPrefix(line, "berth_manifest_problems ") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		n += int(v)
	}
	return n, nil
}
