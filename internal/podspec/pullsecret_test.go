package podspec

import (
	"encoding/base64"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestCheckPullSecret(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name    string
		typ     v1.SecretType
		data    string
		wantErr string
	}{
		{"auth", v1.SecretTypeDockerConfigJson, `{"auths":{"r.example.com":{"auth":"` + b64("u:p") + `"}}}`, ""},
		{"fields", v1.SecretTypeDockerConfigJson, `{"auths":{"r":{"username":"u","password":"p"}},"credsStore":"x"}`, ""},
		{"dockercfg", v1.SecretTypeDockercfg, `{"r":{"auth":"` + b64("u:p") + `"}}`, ""},
		{"auth not base64", v1.SecretTypeDockerConfigJson, `{"auths":{"r":{"auth":"SECRET!"}}}`, `registry "r": auth must be base64(username:password)`},
		{"auth without colon", v1.SecretTypeDockerConfigJson, `{"auths":{"r":{"auth":"` + b64("SECRET") + `"}}}`, `registry "r": auth must be base64(username:password)`},
		{"wrong type", v1.SecretTypeDockerConfigJson, `{"auths":{"r":{"password":1234}}}`, `registry "r": password must be a string`},
		{"auths not an object", v1.SecretTypeDockerConfigJson, `{"auths":"SECRET"}`, `.dockerconfigjson: auths must be an object`},
		{"opaque", v1.SecretTypeOpaque, `{}`, `type "Opaque" holds no registry credentials`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := v1.DockerConfigJsonKey
			if tt.typ == v1.SecretTypeDockercfg {
				key = v1.DockerConfigKey
			}
			err := CheckPullSecret(&v1.Secret{Type: tt.typ, Data: map[string][]byte{key: []byte(tt.data)}})
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q quotes the Secret", err)
			}
		})
	}
}

// FuzzCheckPullSecret reads arbitrary image pull Secrets (a manifest's,
// which berth does not control): it never panics and never quotes them.
func FuzzCheckPullSecret(f *testing.F) {
	f.Add([]byte(`{"auths":{"r":{"auth":"dTpw"}}}`), false)
	f.Add([]byte(`{"auths":{"SECRETSECRET":{"auth":"SECRETSECRET"}}}`), false)
	f.Add([]byte(`{"r":{"username":"SECRETSECRET","password":7}}`), true)
	f.Fuzz(func(t *testing.T, data []byte, legacy bool) {
		s := &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: data}}
		if legacy {
			s = &v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: data}}
		}
		err := CheckPullSecret(s)
		if err == nil {
			return
		}
		// Registry names may be quoted (they are no secret); nothing else.
		msg := err.Error()
		if i := strings.Index(msg, `registry "`); i >= 0 {
			if j := strings.Index(msg[i+10:], `": `); j >= 0 {
				msg = msg[:i] + msg[i+10+j:]
			}
		}
		if strings.Contains(msg, "SECRETSECRET") {
			t.Fatalf("error %q quotes the Secret", err)
		}
	})
}
