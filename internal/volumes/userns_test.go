package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func usernsHost(t *testing.T, root, subuid, subgid string) *Host {
	t.Helper()
	dir := t.TempDir()
	files := [2]string{filepath.Join(dir, "subuid"), filepath.Join(dir, "subgid")}
	for i, content := range []string{subuid, subgid} {
		if content == "" {
			continue
		}
		if err := os.WriteFile(files[i], []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return newHost(t, Options{RootDir: root, SubIDFiles: files})
}

func TestUsernsAllocation(t *testing.T) {
	root := t.TempDir()
	m := usernsHost(t, root, "alice:100000:65536\nberth:196608:196608\n", "berth:196608:196608\n")
	got := map[types.UID]uint32{}
	for _, uid := range []types.UID{"a", "b", "c"} {
		mp, err := m.PodUserns(uid)
		if err != nil {
			t.Fatal(err)
		}
		got[uid] = mp.HostID
	}
	if got["a"] != 196608 || got["b"] != 262144 || got["c"] != 327680 {
		t.Errorf("blocks = %v, want 196608, 262144, 327680", got)
	}
	if _, err := m.PodUserns("d"); err == nil || !strings.Contains(err.Error(), "no free range") {
		t.Errorf("fourth pod: err = %v, want no free range", err)
	}
	// Asking again gives the same block, and so does a restarted berth
	// (a new Builder over the same root directory) for an adopted pod.
	again := usernsHost(t, root, "berth:196608:196608\n", "berth:196608:196608\n")
	for uid, want := range got {
		if mp, err := again.PodUserns(uid); err != nil || mp.HostID != want {
			t.Errorf("pod %s after restart: %v, %v; want %d", uid, mp, err, want)
		}
	}
	// A pod's directory gone frees its block for the next pod.
	if err := again.CleanupPodDir("b"); err != nil {
		t.Fatal(err)
	}
	if mp, err := again.PodUserns("e"); err != nil || mp.HostID != 262144 {
		t.Errorf("pod e: %v, %v; want the freed block 262144", mp, err)
	}
}

func TestUsernsRange(t *testing.T) {
	tests := []struct {
		name, subuid, subgid string
		wantFirst            uint32
		wantErr              string
	}{
		{name: "default without an entry", subuid: "alice:100000:65536\n", wantFirst: defaultUsernsFirst},
		{name: "berth's entry", subuid: "berth:65536:65536\n", subgid: "berth:65536:65536\n", wantFirst: 65536},
		{name: "differing ranges", subuid: "berth:65536:65536\n", subgid: "berth:131072:65536\n", wantErr: "differ"},
		{name: "only one file", subuid: "berth:65536:65536\n", wantErr: "differ"},
		{name: "unaligned", subuid: "berth:100000:65536\n", subgid: "berth:100000:65536\n", wantErr: "multiple of 65536"},
		{name: "from 0", subuid: "berth:0:65536\n", subgid: "berth:0:65536\n", wantErr: "multiple of 65536"},
		{name: "garbage", subuid: "berth:x:y\n", wantErr: "bad line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := usernsHost(t, t.TempDir(), tt.subuid, tt.subgid)
			mp, err := m.PodUserns("a")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || mp.HostID != tt.wantFirst || mp.Length != 65536 {
				t.Fatalf("= %+v, %v; want block at %d", mp, err, tt.wantFirst)
			}
		})
	}
}

// TestUsernsBrokenRecord: a record that is not berth's (broken, planted
// by another user, writable by others, a link) is refused, and no other
// pod is placed while it is: its block might be that pod's.
func TestUsernsBrokenRecord(t *testing.T) {
	const valid = `{"hostID":2147483648,"length":65536}`
	tests := []struct {
		name    string
		plant   func(t *testing.T, p string)
		wantErr string
	}{
		{name: "host ID 0", plant: func(t *testing.T, p string) {
			writeRecord(t, p, `{"hostID":0,"length":65536}`, 0o600)
		}, wantErr: "not a user-namespace record"},
		{name: "writable by others", plant: func(t *testing.T, p string) {
			writeRecord(t, p, valid, 0o666)
		}, wantErr: "writable by group or others"},
		{name: "owned by nobody", plant: func(t *testing.T, p string) {
			writeRecord(t, p, valid, 0o600)
			if os.Geteuid() != 0 {
				t.Skip("changing a file's owner needs root")
			}
			if err := os.Chown(p, 65534, -1); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "owned by uid 65534"},
		{name: "a link", plant: func(t *testing.T, p string) {
			writeRecord(t, p+".real", valid, 0o600)
			if err := os.Symlink(p+".real", p); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "too many levels of symbolic links"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			m := usernsHost(t, root, "", "")
			dir := filepath.Join(root, "pods", "a")
			if err := os.MkdirAll(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			tt.plant(t, filepath.Join(dir, usernsFile))
			if _, err := m.PodUserns("a"); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want the record refused: %q", err, tt.wantErr)
			}
			if _, err := m.PodUserns("b"); err == nil {
				t.Fatal("allocation past an unreadable record")
			}
		})
	}
}

// writeRecord writes a user-namespace record of exactly mode perm.
func writeRecord(t *testing.T, p, content string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}
