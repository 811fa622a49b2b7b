package manifest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// uidKeyName is the file under the state directory holding the key the
// UIDs of pods mix the values they take as environment with.
const uidKeyName = "uid-key"

// uidKeySize is the key's length in bytes.
const uidKeySize = 32

// loadUIDKey returns the node's key for the values of ConfigMaps and
// Secrets a pod takes as environment, creating it on first use (0600, in
// the 0700 state directory). A pod's UID is shown to whoever may list pods
// and is in the logs; hashed without a secret key, a short Secret value
// used as env could be found by trying every candidate against it. The key
// only has to be stable: lost, those pods get new UIDs and restart once.
// Without a state directory (berth validate) there is no key, and the UIDs
// are only shown, never used to adopt running pods.
func loadUIDKey(stateDir string, log *slog.Logger) []byte {
	if stateDir == "" {
		return nil
	}
	p := filepath.Join(stateDir, uidKeyName)
	key, err := readUIDKey(p)
	if err == nil {
		return key
	}
	if !errors.Is(err, fs.ErrNotExist) {
		log.Warn("ignoring the UID key; making a new one (pods using Secrets as env restart once)", "path", p, "err", err)
	}
	key = make([]byte, uidKeySize)
	if _, err := rand.Read(key); err != nil {
		log.Error("cannot make a UID key; pods using Secrets as env get unkeyed UIDs", "err", err)
		return nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		log.Error("cannot keep the UID key; pods using Secrets as env restart when berth restarts", "path", p, "err", err)
		return key
	}
	if err := writeAtomic(stateDir, uidKeyName, key); err != nil {
		log.Error("cannot keep the UID key; pods using Secrets as env restart when berth restarts", "path", p, "err", err)
	}
	return key
}

// readUIDKey reads the key: a regular file of ours no one else may read
// or write, of the key's size.
func readUIDKey(p string) ([]byte, error) {
	info, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if err := OwnedByUs(info, false); err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("not a regular file of mode 0600 (%v)", info.Mode())
	}
	key, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if len(key) != uidKeySize {
		return nil, fmt.Errorf("%d bytes, want %d", len(key), uidKeySize)
	}
	return key, nil
}
