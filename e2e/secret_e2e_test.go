//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// secretValue is the secret text of the broken Secrets below.
const secretValue = "S3cr3t-e2e-value"

// TestSecretValuesNeverQuoted puts Secrets that do not decode next to a
// good pod: a password starting with "*" (an alias to an unknown anchor),
// a tagged value that does not resolve, data that is not base64. Each is
// a DecodeError in /problems naming its file and line, and neither
// /problems, nor berth's log, nor `berth validate` quotes the value.
func TestSecretValuesNeverQuoted(t *testing.T) {
	head := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n" // lines 1-4
	files := []struct {
		name string
		body string // line 5 and on
		line int
	}{
		{"alias", "stringData:\n  password: *" + secretValue + "\n", 6},
		{"tagged", "stringData:\n  password: !!int " + secretValue + "\n", 1},
		{"base64", "data:\n  password: " + secretValue + "!\n", 6},
	}
	manifests := map[string]string{"good.yaml": podManifest(sleeper("good"))}
	for _, f := range files {
		manifests[f.name+".yaml"] = fmt.Sprintf(head, f.name) + f.body
	}
	b := newBerth(t, berthOptions{manifests: manifests})
	b.waitReady()
	b.waitRunning(podName("good"))
	for _, f := range files {
		b.waitProblem("DecodeError", f.name+".yaml")
	}

	code, body, err := b.getUnix("/problems")
	if err != nil || code != 200 {
		t.Fatalf("/problems: %d %v", code, err)
	}
	if strings.Contains(string(body), secretValue) {
		t.Errorf("/problems quotes the Secret's value:\n%s", body)
	}
	var list struct{ Items []struct{ Origin, Error string } }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		want := fmt.Sprintf("%s:%d: ", b.manifestPath(f.name+".yaml"), f.line)
		found := false
		for _, p := range list.Items {
			found = found || strings.HasPrefix(p.Error, want)
		}
		if !found {
			t.Errorf("/problems has no problem starting %q: %+v", want, list.Items)
		}
	}
	if log, _ := os.ReadFile(b.logFile); !strings.Contains(string(log), "manifest rejected") || strings.Contains(string(log), secretValue) {
		t.Errorf("berth's log has no rejection, or quotes the Secret's value")
	}

	out, err := exec.Command(berthBin, "validate", "--node-name", nodeName, b.manifests).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("berth validate: %v, want exit 1:\n%s", err, out)
	}
	if strings.Contains(string(out), secretValue) {
		t.Errorf("berth validate quotes the Secret's value:\n%s", out)
	}
	for _, f := range files {
		if want := fmt.Sprintf("%s:%d: ", b.manifestPath(f.name+".yaml"), f.line); !strings.Contains(string(out), want) {
			t.Errorf("berth validate does not name %s:\n%s", want, out)
		}
	}
}
