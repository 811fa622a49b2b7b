package pullauth

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestParseDockerConfig(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("alice:pa:ss"))
	tests := []struct {
		name    string
		in      string
		legacy  bool
		want    Config
		wantErr string
	}{
		{name: "auths with separate fields", in: `{"auths":{"reg.example.com":{"username":"u","password":"p","email":"e"}},"credsStore":"x"}`,
			want: Config{"reg.example.com": {Username: "u", Password: "p"}}},
		{name: "auth wins and splits at the first colon", in: `{"auths":{"r":{"username":"u","password":"p","auth":"` + auth + `"}}}`,
			want: Config{"r": {Username: "alice", Password: "pa:ss"}}},
		{name: "no auths", in: `{}`, want: Config{}},
		{name: "legacy dockercfg", legacy: true, in: `{"r":{"auth":"` + auth + `"}}`, want: Config{"r": {Username: "alice", Password: "pa:ss"}}},
		{name: "auth not base64", in: `{"auths":{"r":{"auth":"secret!!"}}}`, wantErr: `entry "r": auth is not base64`},
		{name: "auth without a colon", in: `{"auths":{"r":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("secret")) + `"}}}`,
			wantErr: `entry "r": auth must be base64(username:password)`},
		{name: "wrong type, the value not quoted", in: `{"auths":{"r":{"password":12345}}}`, wantErr: `entry "r": wrong type at "password": want string`},
		{name: "not JSON, never quoted", in: `{"auths": secret`, wantErr: "not a docker config JSON object: syntax error at byte 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := ParseDockerConfigJSON
			if tt.legacy {
				parse = ParseDockercfg
			}
			got, err := parse([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s: got %+v, want %+v", k, got[k], v)
				}
			}
		})
	}
}

func TestKeyringLookup(t *testing.T) {
	var k Keyring
	k.Add(Config{
		"https://index.docker.io/v1/":  {Username: "hub"},
		"quay.io":                      {Username: "quay"},
		"quay.io/team":                 {Username: "team"},
		"*.example.com":                {Username: "wild"},
		"http://127.0.0.1:5000/v2/":    {Username: "local"},
		"registry.example.com:8443/ns": {Username: "port"},
	})
	tests := []struct {
		repo string // normalized, as criconfig.Repository makes it
		want string // usernames in order
	}{
		{"docker.io/library/busybox", "hub"},
		{"quay.io/team/app", "team quay"},
		{"quay.io/other/app", "quay"},
		{"a.example.com/x", "wild"},
		{"a.b.example.com/x", ""},
		{"127.0.0.1:5000/library/busybox", "local"},
		{"127.0.0.1:5001/library/busybox", ""},
		{"registry.example.com:8443/ns/app", "port"},
		{"registry.example.com/ns/app", "wild"},
		{"localhost/app", ""},
	}
	for _, tt := range tests {
		var got []string
		for _, e := range k.Lookup(tt.repo) {
			got = append(got, e.Username)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%s: %q, want %q", tt.repo, strings.Join(got, " "), tt.want)
		}
	}
}
