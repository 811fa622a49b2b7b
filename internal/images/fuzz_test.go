package images

import (
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/pullauth"
)

// FuzzParseProviderResponse reads arbitrary output of a credential
// provider plugin (a program berth runs but does not control). It never
// panics; what it accepts has a known cacheKeyType, no negative
// cacheDuration and auth keys a Keyring can match without panicking; and
// an error never quotes a password or a token the output holds
// (SECRETSECRET in the seeds) nor, beyond protocol values, the output.
func FuzzParseProviderResponse(f *testing.F) {
	for _, s := range []string{
		response("Image", "5m", `"reg.example.com":{"username":"u","password":"SECRETSECRET"}`),
		response("Registry", "", `"*.azurecr.io":{"username":"00000000-0000-0000-0000-000000000000","password":"SECRETSECRET"}`),
		response("Global", "-1s", `"%zz":{"username":"u","password":"SECRETSECRET"}`),
		response("Image", "SECRETSECRET", `"reg.example.com":{"username":"u","password":"p"}`),
		response("Image", "", `"reg.example.com":{"username":"u","password":12345678}`),
		response("Image", "", `"reg.example.com":{"username":"u","password":"a","password":"SECRETSECRET"}`),
		response("Image", "", `"reg.example.com":{"username":"u","token":"SECRETSECRET"}`),
		`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"r":{"password":"SECRETSECRET"`,
		`password: SECRETSECRET`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := parseProviderResponse(data, ProviderAPIVersionV1)
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "SECRETSECRET") || strings.Contains(msg, "12345678") || (len(data) >= 16 && strings.Contains(msg, string(data))) {
				t.Fatalf("error %q quotes the output", msg)
			}
			return
		}
		switch resp.CacheKeyType {
		case "Image", "Registry", "Global":
		default:
			t.Fatalf("accepted cacheKeyType %q", resp.CacheKeyType)
		}
		if resp.CacheDuration != nil && resp.CacheDuration.Duration < 0 {
			t.Fatalf("accepted a negative cacheDuration %s", resp.CacheDuration.Duration)
		}
		cfg := pullauth.Config{}
		for pattern, a := range resp.Auth {
			cfg[pattern] = pullauth.Entry{Username: a.Username, Password: a.Password}
		}
		var k pullauth.Keyring
		k.Add(cfg)
		for pattern := range cfg {
			k.Lookup(pattern)
		}
		k.Lookup("docker.io/library/busybox")
	})
}

// TestParseProviderResponse: what a response must be, and errors that
// name what is wrong without the values it holds.
func TestParseProviderResponse(t *testing.T) {
	tests := []struct {
		name, data, wantErr string
	}{
		{"good", response("Image", "5m", `"reg.example.com":{"username":"u","password":"SECRETSECRET"}`), ""},
		{"no auth", response("Global", "", ``), ""},
		{"unknown field", response("Image", "", `"reg.example.com":{"username":"u","token":"SECRETSECRET"}`), `unknown field "auth.reg.example.com.token"`},
		{"duplicate field", response("Image", "", `"r.io":{"password":"a","password":"SECRETSECRET"}`), `duplicate field "auth.r.io.password"`},
		{"wrong type", response("Image", "", `"r.io":{"password":12345678}`), "a field has the wrong type"},
		{"bad duration", response("Image", "SECRETSECRET", ``), "a field has the wrong type"},
		{"bad cacheKeyType", response("Pod", "", ``), `cacheKeyType is "Pod", want Image, Registry or Global`},
		{"no cacheKeyType", strings.Replace(response("Image", "", ``), `"cacheKeyType":"Image",`, "", 1), `cacheKeyType is "", want Image`},
		{"wrong kind", strings.Replace(response("Image", "", ``), "CredentialProviderResponse", "CredentialProviderRequest", 1), `response kind is "CredentialProviderRequest"`},
		{"bad pattern", response("Image", "", `"%zz":{"password":"SECRETSECRET"}`), `auth key "%zz" is not a registry pattern`},
		{"truncated", `{"kind":"CredentialProviderResponse","auth":{"r":{"password":"SECRETSECRET"`, "syntax error at byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseProviderResponse([]byte(tt.data), ProviderAPIVersionV1)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "12345678")) {
				t.Errorf("the error quotes a value: %v", err)
			}
		})
	}
}
