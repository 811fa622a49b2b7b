package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
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

// runValidate runs berth validate with args and stdin, returning its exit
// code, stdout and stderr.
func runValidate(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	root := NewRoot("dev", &out, &errb)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"validate"}, args...))
	code := 0
	if err := root.Execute(); err != nil {
		code = 2
		if c, ok := errors.AsType[exitError](err); ok {
			code = int(c)
		}
	}
	return code, out.String(), errb.String()
}

func withHostPort(pod string, port int) string {
	return pod + "    ports:\n    - containerPort: 80\n      hostPort: " + strconv.Itoa(port) + "\n"
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"good", "bad", "clash", "warn"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	good, bad, clash, warn := filepath.Join(dir, "good"), filepath.Join(dir, "bad"), filepath.Join(dir, "clash"), filepath.Join(dir, "warn")
	files := map[string]string{
		"good/web.yaml":        validPod,
		"good/web.yaml.backup": "not: [yaml",
		"bad/a.yaml":           validPod,
		"bad/b.yaml":           validPod + "    imagePullPolicy: Sometimes\n",
		"bad/c.yaml":           validPod,
		"bad/d.yaml":           "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n",
		"bad/e.yaml": strings.Replace(withHostPort(validPod, 8080), "name: web", "name: two", 1) +
			"  - name: side\n    image: nginx:1\n    ports:\n    - containerPort: 81\n      hostPort: 8080\n",
		"clash/a.yaml":  withHostPort(validPod, 8080),
		"clash/b.yaml":  withHostPort(strings.Replace(validPod, "name: web", "name: api", 1), 8080),
		"warn/web.yaml": validPod + "  tolerations:\n  - operator: Exists\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		stdin      string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{"valid directory", "", []string{good, "--node-name", "n1"}, 0, nil, []string{"1 pod in 1 file is valid\n"}},
		{"quiet", "", []string{good, "-q", "--node-name", "n1"}, 0, nil, nil},
		{"problems with file, line and field", "", []string{"--node-name", "n1", bad}, 1, []string{
			bad + `/b.yaml:9: spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`,
			bad + `/c.yaml:4: metadata.name: pod "web-n1" in namespace "default" is already defined by ` + bad + `/a.yaml:4`,
			bad + `/d.yaml:2: kind: berth runs Pods (and PodLists, ConfigMaps, Secrets); Deployment is not run: use a Pod`,
			bad + `/e.yaml:16: spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"`,
		}, []string{"4 problems in 4 files\n"}},
		{"host ports clash across files", "", []string{"--node-name", "n1", clash}, 1, []string{
			clash + `/b.yaml:11: spec.containers[0].ports[0].hostPort: hostPort TCP/0.0.0.0/8080 clashes with TCP/0.0.0.0/8080 of pod "web-n1" at ` + clash + `/a.yaml:11: both pods run, but only one can hold the port`,
		}, []string{"1 problem in 1 file\n"}},
		{"ignored fields warn", "", []string{"--node-name", "n1", warn}, 0, nil, []string{
			"Warning: " + warn + "/web.yaml:9: spec.tolerations: ignored: berth runs the pod on this node without scheduling\n",
			"1 pod in 1 file is valid (1 warning)\n",
		}},
		{"stdin", strings.Replace(validPod, "name: web", "name: api", 1), []string{"--node-name", "n1", "-", good}, 0, nil, []string{"2 pods in 2 files are valid\n"}},
		{"stdin problems", validPod + "    imagePullPolicy: Sometimes\n", []string{"--node-name", "n1", "-"}, 1,
			[]string{`<stdin>:9: spec.containers[0].imagePullPolicy: Unsupported value`}, nil},
		{"stdin in json", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n", []string{"--node-name", "n1", "-o", "json", "-"}, 1,
			[]string{`"origin": "<stdin>",`, `"line": 2,`, `"field": "kind",`, `"items": [],`}, []string{"<stdin>:2: kind: berth runs Pods"}},
		{"stdin over the size limit", validPod, []string{"--node-name", "n1", "--max-bytes", "20", "-"}, 1,
			[]string{"<stdin>: manifest is larger than the limit of 20 bytes"}, nil},
		{"preview as yaml, flags after paths", "", []string{good, "-o", "yaml", "--node-name", "N1"}, 0,
			[]string{"apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n", "kind: List", "name: web-n1", "nodeName: n1",
				"imagePullPolicy: IfNotPresent", "terminationGracePeriodSeconds: 30", "problems: []\n"}, []string{"1 pod in 1 file is valid\n"}},
		{"preview as json keeps problems on stderr", "", []string{"-o", "json", "--node-name", "n1", bad + "/b.yaml", bad + "/a.yaml"}, 1,
			[]string{"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",", `"name": "web-n1"`,
				`"field": "spec.containers[0].imagePullPolicy"`, `"severity": "error"`}, []string{"b.yaml:9: spec.containers[0].imagePullPolicy"}},
		{"json of an invalid file has no items", "", []string{"-o", "json", "--node-name", "n1", bad + "/b.yaml"}, 1,
			[]string{`"items": [],`, `"line": 9,`, `"reason": "Invalid",`}, nil},
		{"json keeps warnings", "", []string{"-o", "json", "--node-name", "n1", warn}, 0,
			[]string{`"field": "spec.tolerations",`, `"severity": "warning"`, `"reason": "IgnoredField",`}, []string{"Warning: "}},
		{"missing path", "", []string{"--node-name", "n1", filepath.Join(dir, "nope")}, 1, []string{"nope: stat"}, nil},
		{"no path", "", []string{"--node-name", "n1"}, 2, nil, []string{"berth validate: want at least one PATH"}},
		{"bad output format", "", []string{"-o", "xml", good}, 2, nil, []string{`-o "xml"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runValidate(tt.stdin, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(out, want) {
					t.Errorf("stdout does not contain %q:\n%s", want, out)
				}
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr does not contain %q:\n%s", want, errOut)
				}
			}
			if tt.wantCode == 0 && tt.wantStdout == nil && out != "" {
				t.Errorf("valid manifests printed %q", out)
			}
			if tt.wantStderr == nil && tt.wantCode != 1 && errOut != "" {
				t.Errorf("stderr = %q, want nothing", errOut)
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
