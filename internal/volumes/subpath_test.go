package volumes

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podpath/podpathtest"
)

// needRoot skips a test that mounts.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind-mounting a subPath needs root")
	}
}

// openModes runs f with openat2 and again with the openat fallback of
// kernels without it.
func openModes(t *testing.T, f func(t *testing.T)) {
	for _, mode := range []struct {
		name      string
		noOpenat2 bool
	}{{"openat2", false}, {"openat", true}} {
		t.Run(mode.name, func(t *testing.T) {
			prev := noOpenat2.Load()
			noOpenat2.Store(mode.noOpenat2)
			t.Cleanup(func() { noOpenat2.Store(prev) })
			f(t)
		})
	}
}

// TestSubPathStaysInVolume plays a container that planted symbolic links in
// its emptyDir before a restart, and manifests whose subPath names a path
// outside the volume: each subPath is refused, and nothing is created or
// changed outside the volume.
func TestSubPathStaysInVolume(t *testing.T) {
	tests := []struct {
		name    string
		plant   func(t *testing.T, vol, victim string) // what the container left in its volume
		subPath func(victim string) string
		wantErr string
	}{
		{
			name:    "symlink to a host directory in the middle",
			plant:   symlinkAt("a", func(victim string) string { return victim }),
			subPath: func(string) string { return "a/made-by-berth" },
			wantErr: `"a" is a symbolic link that leads out of the volume`,
		},
		{
			name:    "symlink to a host directory as the last component",
			plant:   symlinkAt("a", func(victim string) string { return victim }),
			subPath: func(string) string { return "a" },
			wantErr: `"a" is a symbolic link that leads out of the volume`,
		},
		{
			name:    "symlink to a host file",
			plant:   symlinkAt("a", func(victim string) string { return filepath.Join(victim, "keep") }),
			subPath: func(string) string { return "a" },
			wantErr: `"a" is a symbolic link that leads out of the volume`,
		},
		{
			name:    "dangling symlink to a host path not made yet",
			plant:   symlinkAt("a", func(victim string) string { return filepath.Join(victim, "new") }),
			subPath: func(string) string { return "a/made-by-berth" },
			wantErr: `"a" is a symbolic link that leads out of the volume`,
		},
		{
			name:    "symlink deeper down, to a host directory",
			plant:   symlinkAt("x/y/z", func(victim string) string { return filepath.Join(victim, "containers") }),
			subPath: func(string) string { return "x/y/z/app/made-by-berth" },
			wantErr: `"x/y/z" is a symbolic link that leads out of the volume`,
		},
		{
			name:    "relative symlink climbing out of the volume",
			plant:   symlinkAt("a", func(string) string { return "../../../../../../victim" }),
			subPath: func(string) string { return "a/made-by-berth" },
			wantErr: `"a" is a symbolic link that leads out of the volume`,
		},
		{
			name: "chain of links climbing out of the volume",
			plant: func(t *testing.T, vol, victim string) {
				symlinkAt("a", func(string) string { return "b/c" })(t, vol, victim)
				symlinkAt("b/c", func(string) string { return "../../../../../../../victim" })(t, vol, victim)
			},
			subPath: func(string) string { return "a/made-by-berth" },
			wantErr: `"b/c" is a symbolic link that leads out of the volume`,
		},
		{
			name:    "loop of links",
			plant:   symlinkAt("a", func(string) string { return "a/x" }),
			subPath: func(string) string { return "a/made-by-berth" },
			wantErr: "more than 40 symbolic links",
		},
		{
			name:    "dot-dot",
			subPath: func(string) string { return "../../../../../../victim/made-by-berth" },
			wantErr: `must not contain ".."`,
		},
		{
			name:    "dot-dot after a directory",
			subPath: func(string) string { return "a/../../made-by-berth" },
			wantErr: `must not contain ".."`,
		},
		{
			name:    "absolute",
			subPath: func(victim string) string { return filepath.Join(victim, "made-by-berth") },
			wantErr: "must be a relative path",
		},
		{
			name: "a file in the middle",
			plant: func(t *testing.T, vol, _ string) {
				if err := os.WriteFile(filepath.Join(vol, "f"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			subPath: func(string) string { return "f/made-by-berth" },
			wantErr: `"f" is not a directory`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			openModes(t, func(t *testing.T) {
				bed := podpathtest.NewVictimBed(t)
				m := newHost(t, Options{RootDir: bed.Root, PodLogsDir: bed.Logs})
				pod := testPod()
				t.Cleanup(func() {
					if err := m.CleanupPodDir(pod.UID); err != nil {
						t.Error(err)
					}
				})
				vol, _, err := m.VolumePath(pod, &v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
				if err != nil {
					t.Fatal(err)
				}
				if tt.plant != nil {
					tt.plant(t, vol, bed.Victim)
				}
				_, err = m.PrepareSubPath(pod.UID, "data", "app", 0, vol, tt.subPath(bed.Victim))
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				bed.Check(t)
			})
		})
	}
}

// symlinkAt plants a symbolic link at rel in the volume, its parents
// made as directories, pointing at what target gives for the victim.
func symlinkAt(rel string, target func(victim string) string) func(t *testing.T, vol, victim string) {
	return func(t *testing.T, vol, victim string) {
		t.Helper()
		link := filepath.Join(vol, rel)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(vol, "b"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target(victim), link); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenSubPath covers the walk itself: what it creates, with which
// permissions, and what it opens.
func TestOpenSubPath(t *testing.T) {
	link := func(target, at string) func(t *testing.T, vol string) {
		return func(t *testing.T, vol string) {
			t.Helper()
			for _, d := range []string{"b", "c", "..2026_01_01"} {
				if err := os.Mkdir(filepath.Join(vol, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(vol, "..2026_01_01", "greeting"), []byte("hi"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("..2026_01_01", filepath.Join(vol, "..data")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(vol, at)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name     string
		setup    func(t *testing.T, vol string)
		subPath  string
		resolved string // where subPath leads, when not to itself
		wantDir  bool
		wantMode os.FileMode
	}{
		{name: "missing directories are made with the volume's mode", subPath: "x/y/z", wantDir: true, wantMode: 0o777},
		{name: "dot components are skipped", subPath: "./x//y/.", wantDir: true, wantMode: 0o777},
		{
			name: "an existing directory keeps its mode",
			setup: func(t *testing.T, vol string) {
				if err := os.Mkdir(filepath.Join(vol, "x"), 0o700); err != nil {
					t.Fatal(err)
				}
			},
			subPath: "x", wantDir: true, wantMode: 0o700,
		},
		{
			name: "an existing file",
			setup: func(t *testing.T, vol string) {
				if err := os.WriteFile(filepath.Join(vol, "f"), []byte("x"), 0o640); err != nil {
					t.Fatal(err)
				}
			},
			subPath: "f", wantMode: 0o640,
		},
		{
			name:  "a link inside the volume is followed",
			setup: link("b", "a"), subPath: "a", resolved: "b", wantDir: true, wantMode: 0o755,
		},
		{
			name:  "a missing directory behind a link is made in its target",
			setup: link("b", "a"), subPath: "a/new", resolved: "b/new", wantDir: true, wantMode: 0o777,
		},
		{
			name:  "a link with .. that stays inside",
			setup: link("b/../c", "a"), subPath: "a", resolved: "c", wantDir: true, wantMode: 0o755,
		},
		{
			name:  "a configMap's file, through ..data",
			setup: link("..data/greeting", "greeting"), subPath: "greeting", resolved: "..2026_01_01/greeting", wantMode: 0o644,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			openModes(t, func(t *testing.T) {
				vol := filepath.Join(t.TempDir(), "vol")
				if err := os.Mkdir(vol, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(vol, 0o777); err != nil {
					t.Fatal(err)
				}
				if tt.setup != nil {
					tt.setup(t, vol)
				}
				f, err := openSubPath(vol, tt.subPath)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				got, err := f.Stat()
				if err != nil {
					t.Fatal(err)
				}
				resolved := tt.resolved
				if resolved == "" {
					resolved = tt.subPath
				}
				want, err := os.Lstat(filepath.Join(vol, resolved))
				if err != nil {
					t.Fatal(err)
				}
				if !os.SameFile(got, want) {
					t.Errorf("opened %v, want %s", got, filepath.Join(vol, resolved))
				}
				if want.IsDir() != tt.wantDir || want.Mode().Perm() != tt.wantMode {
					t.Errorf("%s: mode %v, want dir %v and %v", resolved, want.Mode(), tt.wantDir, tt.wantMode)
				}
			})
		})
	}
}

// TestOpenSubPathProcLinks: a hostPath of /proc with a subPath through
// its magic links (a process's root, its cwd) is refused.
func TestOpenSubPathProcLinks(t *testing.T) {
	for _, subPath := range []string{"self/root/etc", "self/cwd/made-by-berth", "thread-self/exe"} {
		t.Run(subPath, func(t *testing.T) {
			openModes(t, func(t *testing.T) {
				f, err := openSubPath("/proc", subPath)
				if err == nil {
					f.Close()
					t.Fatalf("opened /proc/%s", subPath)
				}
				if !errors.Is(err, errLeaves) {
					t.Errorf("err = %v, want a symbolic link out of the volume refused", err)
				}
			})
		})
	}
}

// TestSubPathBindIsWhatWasOpened is the check-then-use race: a second
// container of the pod swaps the subPath for a symbolic link to a host
// directory after berth opened it. The bind mount, made from the open
// descriptor, is of the directory berth opened, not of the link's target.
func TestSubPathBindIsWhatWasOpened(t *testing.T) {
	needRoot(t)
	for _, kind := range []string{"directory", "file"} {
		t.Run(kind, func(t *testing.T) {
			bed := podpathtest.NewVictimBed(t)
			vol := filepath.Join(bed.Root, "vol")
			if err := os.Mkdir(vol, 0o777); err != nil {
				t.Fatal(err)
			}
			sub := filepath.Join(vol, "a")
			victim := bed.Victim
			if kind == "directory" {
				err := os.Mkdir(sub, 0o777)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.WriteFile(sub, []byte("mine"), 0o666); err != nil {
					t.Fatal(err)
				}
				victim = filepath.Join(bed.Victim, "keep")
			}
			f, err := openSubPath(vol, "a")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// The swap, between the open and the bind.
			if err := os.Rename(sub, sub+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, sub); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(bed.Root, "mnt")
			if err := bindSubPath(f, target); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := unmountAll(target); err != nil {
					t.Error(err)
				}
			})
			got, err := os.Stat(target)
			if err != nil {
				t.Fatal(err)
			}
			opened, err := os.Stat(sub + ".old")
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(got, opened) {
				t.Fatalf("the bind mount is not of the directory berth opened")
			}
			// Writing through the mount, as the container would.
			write := target
			if kind == "directory" {
				write = filepath.Join(target, "made-by-container")
			}
			if err := os.WriteFile(write, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			bed.Check(t)
		})
	}
}

// TestSubPathMountsCleanup: the bind mounts of a pod's subPaths are
// replaced on a restart, not stacked, and go with the pod directory,
// without anything in the volumes they show going with them; a mount
// point that cannot be removed stops the removal of the pod directory.
func TestSubPathMountsCleanup(t *testing.T) {
	needRoot(t)
	m := newHost(t, Options{})
	pod := testPod()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two volumes of the same host directory, as a container's first and
	// second volumeMount.
	bind := func(volume string, index int, subPath string) string {
		t.Helper()
		target, err := m.PrepareSubPath(pod.UID, volume, "app", index, host, subPath)
		if err != nil {
			t.Fatal(err)
		}
		return target
	}
	podDir := mustPath(t)(m.PodDir(pod.UID))
	t.Cleanup(func() {
		for _, mp := range mustMounts(t, podDir) {
			_ = unmountAll(mp)
		}
	})
	for range 3 {
		expectBind(t, bind("host", 0, "d"), "volume-subpaths/host/app/0", filepath.Join(host, "d"))
		expectBind(t, bind("file", 1, "f"), "volume-subpaths/file/app/1", filepath.Join(host, "f"))
	}
	want := []string{
		filepath.Join(podDir, "volume-subpaths/file/app/1"),
		filepath.Join(podDir, "volume-subpaths/host/app/0"),
	}
	if got := mustMounts(t, podDir); !slices.Equal(got, want) {
		t.Fatalf("mounts after three starts = %v, want one each: %v", got, want)
	}
	// The subPath turns from a directory into a file between two starts.
	expectBind(t, bind("host", 0, "f"), "volume-subpaths/host/app/0", filepath.Join(host, "f"))

	// A mount point that is no longer empty (never berth's doing) cannot
	// be removed: the cleanup stops before removing the pod directory.
	stray := filepath.Join(podDir, "volume-subpaths/host/other/0")
	if err := os.MkdirAll(stray, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stray, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.CleanupPodDir(pod.UID); err == nil {
		t.Fatal("cleanup removed a pod directory whose mount point it could not remove")
	}
	if _, err := os.Stat(filepath.Join(stray, "x")); err != nil {
		t.Errorf("the cleanup went into the mount point: %v", err)
	}
	if err := os.Remove(filepath.Join(stray, "x")); err != nil {
		t.Fatal(err)
	}
	if err := m.CleanupPodDir(pod.UID); err != nil {
		t.Fatal(err)
	}
	if got := mustMounts(t, podDir); len(got) != 0 {
		t.Errorf("still mounted after cleanup: %v", got)
	}
	if _, err := os.Lstat(podDir); !os.IsNotExist(err) {
		t.Errorf("pod directory still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "f")); err != nil || string(b) != "keep" {
		t.Errorf("the hostPath's file after cleanup: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(host, "d")); err != nil || !fi.IsDir() {
		t.Errorf("the hostPath's subPath directory after cleanup: %v", err)
	}
}

// mustMounts lists the mount points under dir, sorted.
func mustMounts(t *testing.T, dir string) []string {
	t.Helper()
	mps, err := mountPointsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(mps)
	return mps
}

// FuzzOpenSubPath walks arbitrary subPaths through arbitrary symbolic
// links a container may plant (a at the volume's root, b/c below it;
// "VICTIM" in a target stands for the victim directory's host path).
// Whatever it opens lies inside the volume, and nothing outside the
// volume is created or changed.
func FuzzOpenSubPath(f *testing.F) {
	for _, s := range [][3]string{
		{"a/made-by-berth", "VICTIM", "x"},
		{"a/made-by-berth", "../../victim", "x"},
		{"a/new", "b/c", "../../victim"},
		{"b/c/d/e", "b", "../a/../b"},
		{"a", "a", "a"},
		{"./b//c/.", ".", "."},
		{"greeting", "..data/greeting", "VICTIM/keep"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, subPath, linkA, linkC string) {
		bed := podpathtest.NewVictimBed(t)
		vol := filepath.Join(bed.Root, "vol")
		if err := os.MkdirAll(filepath.Join(vol, "b"), 0o777); err != nil {
			t.Fatal(err)
		}
		for at, target := range map[string]string{"a": linkA, "b/c": linkC} {
			if os.Symlink(strings.ReplaceAll(target, "VICTIM", bed.Victim), filepath.Join(vol, at)) != nil {
				return // not a name a link can hold
			}
		}
		realVol, err := filepath.EvalSymlinks(vol)
		if err != nil {
			t.Fatal(err)
		}
		file, err := openSubPath(vol, subPath)
		if err == nil {
			got, lerr := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(file.Fd())))
			file.Close()
			if lerr != nil {
				t.Fatal(lerr)
			}
			if got != realVol && !strings.HasPrefix(got, realVol+"/") {
				t.Fatalf("openSubPath(%q) with a -> %q, b/c -> %q opened %s, outside %s", subPath, linkA, linkC, got, realVol)
			}
		}
		bed.Check(t)
	})
}
