package images

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podenv"
)

func TestPullCredentials(t *testing.T) {
	root := t.TempDir()
	var logs bytes.Buffer
	secret := func(name, registry, user string) *v1.Secret {
		return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: v1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"` + registry + `":{"username":"` + user + `","password":"pw-` + user + `"}}}`)}}
	}
	objs := podenv.PodObjects{Secrets: map[string]*v1.Secret{
		"a": secret("a", "reg.example.com", "pod-a"), "b": secret("b", "reg.example.com", "pod-b"),
		"opaque": {Type: v1.SecretTypeOpaque},
	}}
	puller := New(nil, Options{RootDir: root, CredentialDirs: []string{filepath.Join(root, "none"), root},
		Objects: func(types.UID) podenv.PodObjects { return objs }, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	pod := func(secrets ...string) *v1.Pod {
		p := &v1.Pod{}
		for _, s := range secrets {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
		}
		return p
	}
	users := func(p *v1.Pod, image string) string {
		t.Helper()
		creds, err := puller.Credentials(p, image)
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, c := range creds {
			out = append(out, c.Username)
		}
		return strings.Join(out, " ")
	}
	if got := users(pod("a", "b"), "reg.example.com/app:1"); got != "pod-a pod-b" {
		t.Errorf("pod secrets: %q", got)
	}
	if got := users(pod("a"), "other.example.com/app:1"); got != "" {
		t.Errorf("another registry: %q, want none (an anonymous pull)", got)
	}
	if got := users(pod("missing"), "reg.example.com/app"); got != `error: image pull Secret "missing" not found` {
		t.Errorf("missing secret: %q", got)
	}
	if got := users(pod("opaque"), "reg.example.com/app"); !strings.Contains(got, "holds no registry credentials") {
		t.Errorf("opaque secret: %q", got)
	}

	node := filepath.Join(root, "config.json")
	if err := os.WriteFile(node, []byte(`{"auths":{"reg.example.com":{"username":"node","password":"pw-node"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := users(pod("a"), "reg.example.com/app"); got != "pod-a node" {
		t.Errorf("with the node's file: %q, want the pod's first", got)
	}
	if err := os.Chmod(node, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := users(pod(), "reg.example.com/app"); got != "" {
		t.Errorf("a world-writable node file was used: %q", got)
	}
	if !strings.Contains(logs.String(), "writable by group or others") {
		t.Errorf("the refused file was not logged: %s", logs.String())
	}
	if strings.Contains(logs.String(), "pw-") {
		t.Errorf("a password was logged: %s", logs.String())
	}
}
