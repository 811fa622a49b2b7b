package cli

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestExamplesValidate runs `berth validate` on examples/, as the README
// tells operators to, and checks every example pod is accepted.
func TestExamplesValidate(t *testing.T) {
	var out, errb bytes.Buffer
	code := Execute("dev", []string{"validate", "--node-name", "node1", "-o", "json", "../../examples", "../../examples/http/pods.yaml"}, &out, &errb)
	if code != 0 {
		t.Fatalf("berth validate examples: exit %d\n%s", code, errb.String())
	}
	var list v1.PodList
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	want := "crashloop-node1 env-demo-node1 from-http-node1 init-demo-node1 job-fail-node1 job-once-node1 job-retry-node1 resources-demo-node1 web-host-node1 web-pod-node1"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("example pods:\n got %s\nwant %s", got, want)
	}
}
