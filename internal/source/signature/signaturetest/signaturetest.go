// Package signaturetest makes deterministic SSH keys and signatures for the
// tests of signed sources. It imports no berth package, so that the tests of
// package signature can use it too; its values are immutable.
package signaturetest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Key is a deterministic ed25519 SSH key.
type Key struct {
	Signer ssh.Signer
	Pub    string // authorized_keys form, without comment
}

// NewKey makes the key of seed: the same seed, the same key.
func NewKey(t testing.TB, seed byte) Key {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Signer: signer, Pub: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))}
}

// Sign makes an armored signature of body in namespace, as ssh-keygen -Y
// sign writes it.
func (k Key) Sign(t testing.TB, body []byte, namespace string) []byte {
	t.Helper()
	sig, err := sshsig.Sign(bytes.NewReader(body), k.Signer, sshsig.HashSHA512, namespace)
	if err != nil {
		t.Fatal(err)
	}
	return sshsig.Armor(sig)
}

// WriteLegacySerial writes an earlier berth's serial file of one origin
// into dir.
func WriteLegacySerial(t testing.TB, dir, source, origin string, serial uint64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(origin))
	data := fmt.Sprintf(`{"version":1,"source":%q,"origin":%q,"serial":%d,"accepted":"2026-11-24T00:00:00Z"}`, source, origin, serial)
	if err := os.WriteFile(filepath.Join(dir, source+"-"+hex.EncodeToString(sum[:])+".json"), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
