package kuberuntime

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeri "k8s.io/cri-api/pkg/apis/testing"

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
	m := NewManager(nil, nil, Options{RootDir: root, CredentialDirs: []string{filepath.Join(root, "none"), root},
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
		creds, err := m.pullCredentials(p, image)
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

// authImages is a fake image service whose pulls succeed only with the
// password "right", and which records the users it was asked with.
type authImages struct {
	*fakeri.FakeImageService
	users []string
}

func (a *authImages) PullImage(_ context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	if auth == nil {
		a.users = append(a.users, "<anonymous>")
		return "", errors.New("401 Unauthorized")
	}
	a.users = append(a.users, auth.Username)
	if auth.Password != "right" {
		return "", errors.New("401 Unauthorized for " + auth.Username)
	}
	return spec.Image, nil
}

// TestPullTriesEachCredential: the first credential that works pulls; the
// error of a pull that fails with all of them names each failure.
func TestPullTriesEachCredential(t *testing.T) {
	tests := []struct {
		name      string
		creds     []*runtimeapi.AuthConfig
		wantUsers string
		wantErr   string
	}{
		{"anonymous", nil, "<anonymous>", "401 Unauthorized"},
		{"the second works", []*runtimeapi.AuthConfig{{Username: "a", Password: "wrong"}, {Username: "b", Password: "right"}, {Username: "c", Password: "right"}}, "a b", ""},
		{"none works", []*runtimeapi.AuthConfig{{Username: "a", Password: "x"}, {Username: "b", Password: "y"}}, "a b",
			"with each of 2 credentials: 401 Unauthorized for a; 401 Unauthorized for b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := &authImages{FakeImageService: fakeri.NewFakeImageService()}
			m := NewManager(nil, is, Options{})
			_, err := m.pull(context.Background(), &runtimeapi.ImageSpec{Image: "r/app:1"}, tt.creds, nil)
			if got := strings.Join(is.users, " "); got != tt.wantUsers {
				t.Errorf("tried %q, want %q", got, tt.wantUsers)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPullBackoffKey(t *testing.T) {
	a := []*runtimeapi.AuthConfig{{Username: "u", Password: "secret-a"}}
	b := []*runtimeapi.AuthConfig{{Username: "u", Password: "secret-b"}}
	keys := map[string]bool{}
	for _, k := range []string{pullBackoffKey("img:1", nil), pullBackoffKey("img:1", a), pullBackoffKey("img:1", b), pullBackoffKey("img:2", a)} {
		if keys[k] {
			t.Errorf("key %q shared by different images or credentials", k)
		}
		keys[k] = true
		if strings.Contains(k, "secret") {
			t.Errorf("key %q holds a password", k)
		}
	}
	if pullBackoffKey("img:1", a) != pullBackoffKey("img:1", []*runtimeapi.AuthConfig{{Username: "u", Password: "secret-a"}}) {
		t.Errorf("the same credentials give different keys")
	}
	if pullBackoffKey("img:1", nil) != "img:1" {
		t.Errorf("an anonymous pull is keyed by more than its image")
	}
}
