package podpathtest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// VictimBed is a temporary directory holding berth's root and log
// directories and, next to them, a victim directory with a few files:
// what a hostile pod field or runtime object must never reach.
type VictimBed struct {
	Base, Root, Logs, Victim string
	want                     []string // the victim's tree, as victimTree lists it
}

// NewVictimBed makes the directories under t's temporary directory.
func NewVictimBed(t *testing.T) *VictimBed {
	t.Helper()
	base := t.TempDir()
	b := &VictimBed{Base: base, Root: filepath.Join(base, "root"), Logs: filepath.Join(base, "logs"), Victim: filepath.Join(base, "victim")}
	for _, d := range []string{b.Root, b.Logs, filepath.Join(b.Victim, "containers", "app")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"keep", "containers/app/msg"} {
		if err := os.WriteFile(filepath.Join(b.Victim, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b.want = b.victimTree(t)
	return b
}

// victimTree lists every entry of the victim directory with its mode.
func (b *VictimBed) victimTree(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(b.Victim, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v", strings.TrimPrefix(path, b.Base), fi.Mode()))
		return nil
	})
	if err != nil {
		t.Errorf("victim directory: %v", err)
	}
	return out
}

// Check fails the test when anything but root, logs and victim appeared
// next to them, or anything in victim changed.
func (b *VictimBed) Check(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(b.Base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := e.Name(); n != "root" && n != "logs" && n != "victim" {
			t.Errorf("%s created next to the roots", n)
		}
	}
	if got := b.victimTree(t); !slices.Equal(got, b.want) {
		t.Errorf("victim directory changed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(b.want, "\n"))
	}
}
