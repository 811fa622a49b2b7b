package doctor

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
)

// TestCheckFreeSpace: under 10% free (blocks or inodes) is a WARN, under
// 2% a FAIL; a directory not created yet is measured where it will be.
func TestCheckFreeSpace(t *testing.T) {
	tests := []struct {
		name       string
		st         unix.Statfs_t
		notCreated bool
		want       Status
		wantIn     string
	}{
		{"plenty", fsWith(0, 50, 50), false, OK, "2.0 MiB free of 3.9 MiB (50%)"},
		{"at the warning line", fsWith(0, 10, 50), false, OK, "(10%)"},
		{"under 10%", fsWith(0, 9, 50), false, Warn, "under 10% free, where a kubelet would evict pods"},
		{"under 2%", fsWith(0, 1, 50), false, Fail, "under 2% free, container logs will soon fail"},
		{"inodes under 2%", fsWith(0, 50, 1), false, Fail, "10 of 1000 inodes free (1%)"},
		{"no inode count", unix.Statfs_t{Bsize: 4096, Blocks: 1000, Bavail: 500}, false, OK, "(50%)"},
		{"not created yet", fsWith(0, 50, 50), true, OK, "(for LOGS, not created yet)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			logs := filepath.Join(base, "pods")
			measured := logs
			if tt.notCreated {
				measured = base
			} else {
				writeFile(t, filepath.Join(logs, "x"), "", 0o644)
			}
			e := testEnv(t, nil, nil, Options{})
			e.statfs = fakeFS{measured: tt.st}.statfs
			r := e.checkFreeSpace("logs-fs", "--pod-logs-dir", logs)
			checkResult(t, r, tt.want, replaceAll(tt.wantIn, "LOGS", logs))
		})
	}
}

// TestCheckImageFs: the filesystems ImageFsInfo names, the worst decides.
func TestCheckImageFs(t *testing.T) {
	fsInfo := &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems:     []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd/snapshots"}}},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd/containers"}}},
	}
	tests := []struct {
		name   string
		fs     fakeFS
		want   Status
		wantIn string
	}{
		{"both fine", fakeFS{"/var/lib/containerd/snapshots": fsWith(0, 50, 50), "/var/lib/containerd/containers": fsWith(0, 40, 50)}, OK, "/var/lib/containerd/containers: 1.6 MiB free"},
		{"one nearly full", fakeFS{"/var/lib/containerd/snapshots": fsWith(0, 50, 50), "/var/lib/containerd/containers": fsWith(0, 1, 50)}, Fail, "image pulls will soon fail"},
		{"not measurable", fakeFS{}, Warn, "statfs /var/lib/containerd/snapshots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testEnv(t, newFakeRuntime(nil), &fakeImages{FakeImageService: apitest.NewFakeImageService(), fsInfo: fsInfo}, Options{})
			e.statfs = tt.fs.statfs
			checkResult(t, e.checkImageFs(t.Context(), askedRuntime(t, e)), tt.want, tt.wantIn)
		})
	}
}

// TestBytesString: binary units with one decimal.
func TestBytesString(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB"} {
		if got := bytesString(n); got != want {
			t.Errorf("bytesString(%d) = %q, want %q", n, got, want)
		}
	}
}
