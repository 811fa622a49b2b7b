package criconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func usernsBuilder(t *testing.T, root, subuid, subgid string) *Builder {
	t.Helper()
	m, _ := newCfgBuilder(t, Options{RootDir: root})
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
	m.userns.subIDFiles = files
	return m
}

func TestUsernsAllocation(t *testing.T) {
	root := t.TempDir()
	m := usernsBuilder(t, root, "alice:100000:65536\nberth:196608:196608\n", "berth:196608:196608\n")
	got := map[types.UID]uint32{}
	for _, uid := range []types.UID{"a", "b", "c"} {
		mp, err := m.podUserns(uid)
		if err != nil {
			t.Fatal(err)
		}
		got[uid] = mp.HostID
	}
	if got["a"] != 196608 || got["b"] != 262144 || got["c"] != 327680 {
		t.Errorf("blocks = %v, want 196608, 262144, 327680", got)
	}
	if _, err := m.podUserns("d"); err == nil || !strings.Contains(err.Error(), "no free range") {
		t.Errorf("fourth pod: err = %v, want no free range", err)
	}
	// Asking again gives the same block, and so does a restarted berth
	// (a new Builder over the same root directory) for an adopted pod.
	again := usernsBuilder(t, root, "berth:196608:196608\n", "berth:196608:196608\n")
	for uid, want := range got {
		if mp, err := again.podUserns(uid); err != nil || mp.HostID != want {
			t.Errorf("pod %s after restart: %v, %v; want %d", uid, mp, err, want)
		}
	}
	// A pod's directory gone frees its block for the next pod.
	if err := again.CleanupPodDir("b"); err != nil {
		t.Fatal(err)
	}
	if mp, err := again.podUserns("e"); err != nil || mp.HostID != 262144 {
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
			m := usernsBuilder(t, t.TempDir(), tt.subuid, tt.subgid)
			mp, err := m.podUserns("a")
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
			m := usernsBuilder(t, root, "", "")
			dir := filepath.Join(root, "pods", "a")
			if err := os.MkdirAll(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			tt.plant(t, filepath.Join(dir, usernsFile))
			if _, err := m.podUserns("a"); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want the record refused: %q", err, tt.wantErr)
			}
			if _, err := m.podUserns("b"); err == nil {
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

func TestUsernsConfigs(t *testing.T) {
	m := usernsBuilder(t, t.TempDir(), "", "")
	pod := sbPod()
	no := false
	pod.Spec.HostUsers = &no
	sb, err := m.SandboxConfig(pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD,
		Uids: []*runtimeapi.IDMapping{{HostId: defaultUsernsFirst, Length: 65536}},
		Gids: []*runtimeapi.IDMapping{{HostId: defaultUsernsFirst, Length: 65536}}}
	if got := sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got.String() != want.String() {
		t.Errorf("sandbox userns = %v, want %v", got, want)
	}
	cc, err := m.ContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, nil, "busybox")
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got.String() != want.String() {
		t.Errorf("container userns = %v, want %v", got, want)
	}
	// The host's user namespace: no options, as before.
	plain := sbPod()
	plain.UID = "other"
	sb, err = m.SandboxConfig(plain, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got != nil {
		t.Errorf("userns of a hostUsers pod = %v, want none", got)
	}
}
