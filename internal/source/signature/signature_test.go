package signature

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/source/signature/signaturetest"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

func mustSigners(t testing.TB, file string) *Signers {
	t.Helper()
	s, err := ParseAllowedSigners([]byte(file), "allowed_signers")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignersVerify(t *testing.T) {
	ops, other := signaturetest.NewKey(t, 1), signaturetest.NewKey(t, 2)
	body := []byte("# berth.io/serial: 1\napiVersion: v1\nkind: PodList\nitems: []\n")
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name    string
		signers string
		body    []byte
		sig     []byte
		signer  string // on success
		err     string // on failure
	}{
		{name: "bare key", signers: ops.Pub + " ops@laptop\n", body: body, sig: ops.Sign(t, body, Namespace),
			signer: ssh.FingerprintSHA256(ops.Signer.PublicKey())},
		{name: "principals", signers: "# fleet keys\n\nops@example.com " + ops.Pub + "\n", body: body,
			sig: ops.Sign(t, body, Namespace), signer: "ops@example.com"},
		{name: "second of two keys", signers: other.Pub + "\nops@example.com,ci " + ops.Pub + "\n", body: body,
			sig: ops.Sign(t, body, Namespace), signer: "ops@example.com,ci"},
		{name: "namespace pattern", signers: `ops namespaces="git,berth-*" ` + ops.Pub, body: body,
			sig: ops.Sign(t, body, Namespace), signer: "ops"},
		{name: "within validity", signers: `ops valid-after="20260101",valid-before="20270101Z" ` + ops.Pub, body: body,
			sig: ops.Sign(t, body, Namespace), signer: "ops"},
		{name: "tampered body", signers: ops.Pub, body: append(append([]byte{}, body...), "# more\n"...),
			sig: ops.Sign(t, body, Namespace), err: "does not match the body"},
		{name: "key not allowed", signers: ops.Pub, body: body, sig: other.Sign(t, body, Namespace),
			err: "which is not in allowed_signers"},
		{name: "other namespace", signers: ops.Pub, body: body, sig: ops.Sign(t, body, "git"),
			err: `signed in namespace "git"`},
		{name: "key limited to git", signers: `ops namespaces="git" ` + ops.Pub, body: body,
			sig: ops.Sign(t, body, Namespace), err: "may sign only in namespaces git"},
		{name: "expired", signers: `ops valid-before="20260101" ` + ops.Pub, body: body,
			sig: ops.Sign(t, body, Namespace), err: "was valid only before"},
		{name: "not yet valid", signers: `ops valid-after="202612011200Z" ` + ops.Pub, body: body,
			sig: ops.Sign(t, body, Namespace), err: "is valid only after 2026-12-01T12:00:00Z"},
		{name: "garbage", signers: ops.Pub, body: body, sig: []byte("not a signature"), err: "not an SSH signature"},
		{name: "wrong PEM type", signers: ops.Pub, body: body,
			sig: []byte("-----BEGIN SSH FOO-----\nAAAA\n-----END SSH FOO-----\n"), err: "not an SSH signature"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			signer, err := mustSigners(t, tt.signers).Verify(tt.body, tt.sig, now)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("Verify: %v", err)
			case tt.err == "" && signer != tt.signer:
				t.Fatalf("signer = %q, want %q", signer, tt.signer)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("Verify = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}

// TestSignersRefuseSHA1RSA checks an RSA signature made with SHA-1
// ("ssh-rsa"), which the SSHSIG protocol forbids and ssh-keygen -Y verify
// refuses, is refused although the key and the signature are otherwise
// valid (sshsig's parser refuses it; x/crypto alone would verify it).
func TestSignersRefuseSHA1RSA(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("# berth.io/serial: 1\n")
	sum := sha512.Sum512(body)
	// The SSHSIG signed data: magic, then namespace, reserved, hash
	// algorithm and hash as SSH strings.
	signed := append([]byte("SSHSIG"), ssh.Marshal(struct{ Namespace, Reserved, HashAlgorithm, Hash string }{
		Namespace, "", "sha512", string(sum[:])})...)
	for _, tt := range []struct {
		algo string
		ok   bool
	}{{ssh.KeyAlgoRSA, false}, {ssh.KeyAlgoRSASHA256, true}, {ssh.KeyAlgoRSASHA512, true}} {
		sig, err := signer.(ssh.AlgorithmSigner).SignWithAlgorithm(rand.Reader, signed, tt.algo)
		if err != nil {
			t.Fatal(err)
		}
		armored := sshsig.Armor(&sshsig.Signature{Version: 1, PublicKey: signer.PublicKey(), Namespace: Namespace,
			HashAlgorithm: sshsig.HashSHA512, Signature: sig})
		pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
		_, err = mustSigners(t, pub).Verify(body, armored, time.Now())
		if (err == nil) != tt.ok {
			t.Errorf("%s: Verify = %v, want ok %v", tt.algo, err, tt.ok)
		}
	}
}

func TestParseAllowedSignersErrors(t *testing.T) {
	ops := signaturetest.NewKey(t, 1)
	for _, tt := range []struct {
		name, file, err string
	}{
		{"empty", "# nothing\n\n", "allowed_signers: no public key"},
		{"truncated key", "ops ssh-ed25519 AAAAC3Nza\n", "allowed_signers:1: public key after the principals"},
		{"no key", "\nops@example.com\n", "allowed_signers:2: want"},
		{"cert authority", "ops cert-authority " + ops.Pub, "allowed_signers:1: cert-authority is not supported"},
		{"unknown option", "ops no-touch-required " + ops.Pub, `allowed_signers:1: unknown option "no-touch-required"`},
		{"bad time", `ops valid-after="2026" ` + ops.Pub, "allowed_signers:1: valid-after: want YYYYMMDD"},
		{"empty namespaces", `ops namespaces="" ` + ops.Pub, "allowed_signers:1: namespaces needs a value"},
		{"second line bad", ops.Pub + "\nops ssh-rsa !!!\n", "allowed_signers:2:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseAllowedSigners([]byte(tt.file), "allowed_signers")
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("ParseAllowedSigners = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}

func TestLoadAllowedSigners(t *testing.T) {
	ops := signaturetest.NewKey(t, 1)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte(ops.Pub+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAllowedSigners(good); err != nil {
		t.Fatalf("LoadAllowedSigners: %v", err)
	}
	writable := filepath.Join(dir, "writable")
	if err := os.WriteFile(writable, []byte(ops.Pub+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o666); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	large := filepath.Join(dir, "large")
	if err := os.WriteFile(large, bytes.Repeat([]byte("#\n"), maxAllowedSignersBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		writable:                      "writable by group or others",
		link:                          "too many levels of symbolic links",
		large:                         "larger than the limit",
		filepath.Join(dir, "missing"): "no such file",
	} {
		if _, err := LoadAllowedSigners(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadAllowedSigners(%s) = %v, want an error containing %q", filepath.Base(path), err, want)
		}
	}
}

func TestParseSerial(t *testing.T) {
	for _, tt := range []struct {
		body string
		want uint64
		ok   bool
	}{
		{"# berth.io/serial: 42\napiVersion: v1\n", 42, true},
		{"# berth.io/serial: 1764000000\r\n{}", 1764000000, true},
		{"# berth.io/serial:7", 7, true},
		{"# berth.io/serial: 18446744073709551615\n", 18446744073709551615, true},
		{"# berth.io/serial: 18446744073709551616\n", 0, false},
		{"# berth.io/serial: -1\n", 0, false},
		{"# berth.io/serial: 0x10\n", 0, false},
		{"apiVersion: v1\n# berth.io/serial: 42\n", 0, false},
		{"\n# berth.io/serial: 42\n", 0, false},
		{"", 0, false},
	} {
		got, err := ParseSerial([]byte(tt.body))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSerial(%q) = %d, %v; want %d, ok %v", tt.body, got, err, tt.want, tt.ok)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		want    bool
	}{
		{"berth-manifest", true}, {"*", true}, {"berth-*", true}, {"*-manifest", true},
		{"berth-manifes?", true}, {"berth", false}, {"git", false}, {"berth-manifest?", false}, {"", false},
	} {
		if got := globMatch(tt.pattern, Namespace); got != tt.want {
			t.Errorf("globMatch(%q) = %v, want %v", tt.pattern, got, tt.want)
		}
	}
}

// TestSSHKeygenCommands runs the commands docs/fleet.md gives operators, with ssh-keygen itself: a key of each common type signs
// a body, berth verifies it, and ssh-keygen verifies it with the same
// allowed signers file berth reads.
func TestSSHKeygenCommands(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen not installed (apt-get install openssh-client; e2e/testbed/install.sh does)")
	}
	dir := t.TempDir()
	run := func(stdin []byte, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return out
	}
	body := []byte("# berth.io/serial: 7\napiVersion: v1\nkind: PodList\nitems: []\n")
	var allowed strings.Builder
	for _, typ := range []string{"ed25519", "ecdsa", "rsa"} {
		key := "fleet-" + typ
		run(nil, "ssh-keygen", "-q", "-t", typ, "-N", "", "-C", "fleet", "-f", key)
		pub, err := os.ReadFile(filepath.Join(dir, key+".pub"))
		if err != nil {
			t.Fatal(err)
		}
		allowed.WriteString("fleet@example.com " + string(pub))
	}
	if err := os.WriteFile(filepath.Join(dir, "allowed_signers"), []byte(allowed.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	signers, err := LoadAllowedSigners(filepath.Join(dir, "allowed_signers"))
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"ed25519", "ecdsa", "rsa"} {
		t.Run(typ, func(t *testing.T) {
			// As in docs/fleet.md: sign from stdin to stdout (signing a file
			// asks before overwriting an older .sig), then verify as a
			// device would.
			cmd := exec.Command("ssh-keygen", "-Y", "sign", "-f", "fleet-"+typ, "-n", "berth-manifest")
			cmd.Dir, cmd.Stdin = dir, bytes.NewReader(body)
			sig, err := cmd.Output()
			if err != nil {
				t.Fatalf("ssh-keygen -Y sign: %v", err)
			}
			if err := os.WriteFile(filepath.Join(dir, "pods.yaml.sig"), sig, 0o644); err != nil {
				t.Fatal(err)
			}
			run(body, "ssh-keygen", "-Y", "verify", "-f", "allowed_signers", "-I", "fleet@example.com",
				"-n", "berth-manifest", "-s", "pods.yaml.sig")
			signer, err := signers.Verify(body, sig, time.Now())
			if err != nil || signer != "fleet@example.com" {
				t.Fatalf("Verify = %q, %v", signer, err)
			}
			if _, err := signers.Verify(append([]byte("#\n"), body...), sig, time.Now()); err == nil {
				t.Fatal("a changed body verified")
			}
		})
	}
}

// BenchmarkVerify is the cost of checking one signed body of 50 pods
// (about 8 KB) with an ed25519 key, what every new version costs a device.
func BenchmarkVerify(b *testing.B) {
	ops := signaturetest.NewKey(b, 1)
	var pods []string
	for i := range 50 {
		pods = append(pods, podspectest.Manifest(fmt.Sprintf("pod-%d", i), "busybox:1.36"))
	}
	body := []byte("# berth.io/serial: 1\n" + podspectest.List(pods...))
	sig := ops.Sign(b, body, Namespace)
	signers := mustSigners(b, ops.Pub)
	now := time.Now()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := signers.Verify(body, sig, now); err != nil {
			b.Fatal(err)
		}
	}
}
