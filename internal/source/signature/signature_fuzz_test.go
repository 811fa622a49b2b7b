package signature

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/signature/signaturetest"
)

// FuzzParseAllowedSigners feeds arbitrary allowed signers files: parsing
// never panics, and a file it accepts has at least one usable key.
func FuzzParseAllowedSigners(f *testing.F) {
	ops := signaturetest.NewKey(f, 1)
	for _, seed := range []string{
		ops.Pub,
		"ops@example.com " + ops.Pub + " laptop\n",
		`"ops@example.com,ci" namespaces="git,berth-*",valid-after="20260101",valid-before="20270101Z" ` + ops.Pub,
		"# comment\n\n" + ops.Pub + "\r\n",
		"ops cert-authority " + ops.Pub,
		`ops valid-after="2026" ` + ops.Pub,
		"ops ssh-ed25519 AAAA",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseAllowedSigners(data, "fuzz")
		if err != nil {
			return
		}
		if len(s.keys) == 0 {
			t.Fatal("accepted a file without keys")
		}
		for _, k := range s.keys {
			if k.key == nil || k.line < 1 {
				t.Fatalf("incomplete key %+v", k)
			}
		}
	})
}

// FuzzVerifySignature feeds arbitrary bodies and signatures to Verify and
// ParseSerial: nothing panics, and whatever verifies is bound to its body
// (the same signature never verifies a changed body).
func FuzzVerifySignature(f *testing.F) {
	ops := signaturetest.NewKey(f, 1)
	signers := mustSigners(f, "ops "+ops.Pub)
	body := []byte("# berth.io/serial: 3\napiVersion: v1\nkind: PodList\nitems: []\n")
	f.Add(body, ops.Sign(f, body, Namespace))
	f.Add(body, ops.Sign(f, body, "git"))
	f.Add([]byte("# berth.io/serial: 99999999999999999999\n"), []byte("-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n"))
	f.Add([]byte{}, []byte{})
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body, sig []byte) {
		if n, err := ParseSerial(body); err == nil {
			first, _, _ := bytes.Cut(body, []byte("\n"))
			if !bytes.HasPrefix(first, []byte(SerialPrefix)) || !bytes.Contains(first, []byte(strconv.FormatUint(n, 10))) {
				t.Fatalf("serial %d from first line %q", n, first)
			}
		}
		if _, err := signers.Verify(body, sig, now); err != nil {
			return
		}
		if _, err := signers.Verify(append(append([]byte{}, body...), 'x'), sig, now); err == nil {
			t.Fatal("a signature verified a changed body")
		}
	})
}

// FuzzDecodeSerial feeds arbitrary serial files (the persisted accepted
// serials, and an earlier version's per-origin files it migrates):
// decoding never panics, and what it accepts is of the source asked for
// and within the bounds.
func FuzzDecodeSerial(f *testing.F) {
	f.Add([]byte(`{"version":2,"source":"http","origins":{"https://m.example/pods.yaml":{"serial":50,"accepted":"2026-11-24T00:00:00Z"}},"names":{"web-node1_default":{"serial":50,"accepted":"2026-11-24T00:00:00Z"},"ConfigMap/cfg_default":{"serial":7,"accepted":"2026-11-24T00:00:00Z"}}}`))
	f.Add([]byte(`{"version":2,"source":"http","origins":null,"names":{}}`))
	f.Add([]byte(`{"version":1,"source":"http","origin":"https://m.example/pods.yaml","serial":50,"accepted":"2026-11-24T00:00:00Z"}`))
	f.Add([]byte(`{"version":1,"source":"http","origin":"/etc/kubernetes/manifests/web.yaml","serial":1}`))
	f.Add([]byte(`{"version":2,"source":"http","names":{"":{"serial":1}}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if sf, err := decodeSerial(data, podspec.SourceHTTP); err == nil {
			if sf.Version != serialVersion || sf.Source != podspec.SourceHTTP || sf.Origins == nil || sf.Names == nil ||
				len(sf.Origins) > maxSerialOrigins || len(sf.Names) > maxSerialNames {
				t.Fatalf("accepted %+v", sf)
			}
			if _, ok := sf.Names[""]; ok {
				t.Fatalf("accepted an empty name: %+v", sf)
			}
		}
		if lf, err := decodeLegacySerial(data, podspec.SourceHTTP); err == nil {
			if lf.Version != legacySerialVersion || lf.Source != podspec.SourceHTTP || lf.Origin == "" {
				t.Fatalf("accepted %+v", lf)
			}
		}
	})
}
