package laststate

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-agent/berth/internal/statefile"
)

// uidKeyName is the file under the state directory holding the key the
// UIDs berth derives from manifests are HMACs with.
const uidKeyName = "uid-key"

// uidKeySize is the key's length in bytes.
const uidKeySize = 32

// LoadUIDKey returns the node's key for the UIDs berth derives from
// manifests (podspec's contentUID) and from the values pods take as environment
// (podspec's withEnvUID), creating it on first use (0600, in the 0700 state
// directory). A pod's UID is shown to every local user (/pods, the
// directories under /var/log/pods); hashed without a secret key, a short
// value in a manifest or a Secret could be found by trying every candidate
// against it. The key only has to be stable: lost, every pod whose UID
// berth derived gets a new UID and restarts once. Without a state
// directory (berth validate) there is no key, and the UIDs are only shown,
// never used to adopt running pods.
func LoadUIDKey(stateDir string, log *slog.Logger) []byte {
	if stateDir == "" {
		return nil
	}
	p := filepath.Join(stateDir, uidKeyName)
	key, err := readUIDKey(p)
	if err == nil {
		return key
	}
	switch {
	case !errors.Is(err, fs.ErrNotExist):
		log.Warn("ignoring the UID key; making a new one: pods whose UID berth derived get new UIDs and restart once", "path", p, "err", err)
	case hasState(stateDir):
		log.Warn("the UID key is missing from a state directory in use; making a new one: pods whose UID berth derived with the lost key get new UIDs and restart once", "path", p)
	default:
		log.Info("making the node's UID key", "path", p)
	}
	key = make([]byte, uidKeySize)
	if _, err := rand.Read(key); err != nil {
		log.Error("cannot make a UID key; UIDs are unkeyed hashes of the manifests", "err", err)
		return nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		log.Error("cannot keep the UID key; pods whose UID berth derives restart when berth restarts", "path", p, "err", err)
		return key
	}
	if err := statefile.WriteAtomic(stateDir, uidKeyName, key, 0o600); err != nil {
		log.Error("cannot keep the UID key; pods whose UID berth derives restart when berth restarts", "path", p, "err", err)
	}
	return key
}

// hasState reports whether the state directory holds anything besides a
// UID key: a berth ran with it before.
func hasState(stateDir string) bool {
	names, _ := statefile.ListDir(stateDir)
	for _, n := range names {
		if n != uidKeyName && !strings.HasPrefix(n, ".") {
			return true
		}
	}
	return false
}

// readUIDKey reads the key: a regular file of ours no one else may read
// or write, of the key's size.
func readUIDKey(p string) ([]byte, error) {
	key, err := statefile.ReadPrivate(p, uidKeySize)
	if err != nil {
		return nil, err
	}
	if len(key) != uidKeySize {
		return nil, fmt.Errorf("%d bytes, want %d", len(key), uidKeySize)
	}
	return key, nil
}
