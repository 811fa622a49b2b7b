package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
    image: nginx:1
`

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	bad := filepath.Join(dir, "bad")
	for _, d := range []string{good, bad} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"good/web.yaml":        validPod,
		"good/web.yaml.backup": "not: [yaml",
		"bad/a.yaml":           validPod,
		"bad/b.yaml":           validPod + "    imagePullPolicy: Sometimes\n",
		"bad/c.yaml":           validPod,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{"valid directory", []string{good, "--node-name", "n1"}, 0, nil, nil},
		{"problems with file, line and field", []string{"--node-name", "n1", bad}, 1, []string{
			bad + `/b.yaml:9: spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`,
			bad + `/c.yaml:4: metadata.name: pod "web-n1" in namespace "default" is already defined by ` + bad + `/a.yaml:4`,
		}, nil},
		{"preview as yaml, flags after paths", []string{good, "-o", "yaml", "--node-name", "N1"}, 0,
			[]string{"kind: Pod", "name: web-n1", "nodeName: n1", "imagePullPolicy: IfNotPresent", "terminationGracePeriodSeconds: 30"}, nil},
		{"preview as json keeps problems on stderr", []string{"-o", "json", "--node-name", "n1", bad + "/b.yaml", bad + "/a.yaml"}, 1,
			[]string{`"kind": "List"`, `"name": "web-n1"`, "  \"problems\": [\n    {\n      \"source\": \"file\",", `"line": 9,`, `"field": "spec.containers[0].imagePullPolicy",`},
			[]string{"b.yaml:9: spec.containers[0].imagePullPolicy"}},
		{"missing path", []string{"--node-name", "n1", filepath.Join(dir, "nope")}, 1, []string{"nope: stat"}, nil},
		{"no path", []string{"--node-name", "n1"}, 2, nil, []string{"berth validate: want at least one PATH"}},
		{"bad output format", []string{"-o", "xml", good}, 2, nil, []string{`-o "xml"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Execute("dev", append([]string{"validate"}, tt.args...), &out, &errb)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out.String(), errb.String())
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(out.String(), want) {
					t.Errorf("stdout does not contain %q:\n%s", want, out.String())
				}
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(errb.String(), want) {
					t.Errorf("stderr does not contain %q:\n%s", want, errb.String())
				}
			}
			if tt.wantCode == 0 && tt.wantStdout == nil && out.Len() != 0 {
				t.Errorf("valid manifests printed %q", out.String())
			}
		})
	}
}

// TestValidatePermissions checks --manifest-permissions=strict reports
// what the daemon would refuse for its owner or mode, and that without it
// files being authored are not judged by their mode.
func TestValidatePermissions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(path, []byte(validPod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Execute("dev", []string{"validate", "--node-name", "n", dir}, &out, &errOut); code != 0 {
		t.Fatalf("without the flag: exit %d: %s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	code := Execute("dev", []string{"validate", "--node-name", "n", "--manifest-permissions", "strict", dir}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "mode 0666, writable by group or others") {
		t.Fatalf("strict: exit %d, output %q", code, out.String())
	}
}

// TestValidateSecretPermissions: with --manifest-permissions=strict a
// manifest holding a Secret that group or others may read is reported as
// the daemon refuses it, naming the file and the fix; at 0600 it passes.
func TestValidateSecretPermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.yaml")
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: hunter2\n"
	if err := os.WriteFile(path, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Execute("dev", []string{"validate", "--node-name", "n", path}, &out, &errOut); code != 0 {
		t.Fatalf("without the flag: exit %d: %s%s", code, out.String(), errOut.String())
	}
	code := Execute("dev", []string{"validate", "--node-name", "n", "--manifest-permissions", "strict", path}, &out, &errOut)
	if want := "holds a Secret and is mode 0644, readable by group or others; it must be readable by its owner only (chmod 600 " + path; code != 1 || !strings.Contains(out.String(), want) {
		t.Fatalf("strict: exit %d, output %q, want %q", code, out.String(), want)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := Execute("dev", []string{"validate", "--node-name", "n", "--manifest-permissions", "strict", path}, &out, &errOut); code != 0 {
		t.Fatalf("0600: exit %d: %s", code, out.String())
	}
}
