package pullauth

import (
	"strings"
	"testing"
)

// FuzzParseDockerConfig reads arbitrary registry credentials (an image pull
// Secret's .dockerconfigjson, a node's config.json: berth controls
// neither). It never panics; what it accepts matches in a Keyring without
// panicking; and an error never quotes the input, which holds passwords.
func FuzzParseDockerConfig(f *testing.F) {
	for _, s := range []string{
		`{"auths":{"reg.example.com":{"username":"u","password":"p"}}}`,
		`{"auths":{"https://index.docker.io/v1/":{"auth":"dTpw"}},"credsStore":"desktop"}`,
		`{"auths":{"*.example.com:5000/team":{"auth":"bm9jb2xvbg=="}}}`,
		`{"auths":{"%zz":{}}}`,
		`{"r":{"auth":"SECRETSECRET"}}`,
		`{"auths": SECRETSECRET`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, legacy bool) {
		parse := ParseDockerConfigJSON
		if legacy {
			parse = ParseDockercfg
		}
		cfg, err := parse(data)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "SECRETSECRET") || (len(data) >= 8 && !strings.HasPrefix(msg, "entry") && strings.Contains(msg, string(data))) {
				t.Fatalf("error %q quotes the input", msg)
			}
			return
		}
		var k Keyring
		k.Add(cfg)
		for pattern := range cfg {
			k.Lookup(pattern)
		}
		k.Lookup("docker.io/library/busybox")
	})
}
