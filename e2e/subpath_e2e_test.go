//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// TestSubPathSymlinkEscape plays a container that, on its first run,
// replaces the directory its subPath names in its emptyDir with a symbolic
// link to a host directory, and exits. On its restart berth refuses the
// subPath (the container waits with CreateContainerConfigError, a Failed
// event says why, no second container is created) and the host directory
// gains nothing. A bystander pod runs on undisturbed, and removing the pod
// leaves no mount and no pod directory behind.
func TestSubPathSymlinkEscape(t *testing.T) {
	b := newBerth(t, berthOptions{args: fastBackoff, noStart: true, manifests: map[string]string{
		"bystander.yaml": podManifest(sleeper("bystander")),
	}})
	victim := filepath.Join(b.dir, "victim")
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := treeOf(t, victim)
	b.start()
	b.waitReady()
	bystander := b.waitRuntime(podName("bystander"), "main", "")

	// /sub is subPath a/made-by-berth of the emptyDir, which is whole at
	// /vol: the first run swaps a for a link to the victim and exits.
	app := shContainer("app", fmt.Sprintf(`test -d /sub && rm -rf /vol/a && ln -s %s /vol/a && echo planted; exit 1`, victim))
	app.VolumeMounts = []v1.VolumeMount{
		{Name: "data", MountPath: "/vol"},
		{Name: "data", MountPath: "/sub", SubPath: "a/made-by-berth"},
	}
	pod := newPod("planter", app)
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	b.writeManifest("planter.yaml", podManifest(pod))
	name := podName("planter")

	const why = `container "app" volumeMount "data" at /sub subPath "a/made-by-berth": "a" is a symbolic link that leads out of the volume`
	p := b.waitPod(name, "app waiting with CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError"
	})
	if got := treeOf(t, victim); !slices.Equal(got, want) {
		t.Errorf("victim directory changed: %v, want %v", got, want)
	}
	if msg := containerStatus(p, "app").State.Waiting.Message; !strings.Contains(msg, why) {
		t.Errorf("waiting message %q does not say %q", msg, why)
	}
	b.waitFor("a Failed event naming the volumeMount", waitTimeout, func() (bool, string) {
		e := b.findEvent(name, "Failed", why)
		return e != nil, "no such event"
	})
	lines, err := criLogLines(b.podLogPath(p, "app", 0))
	if err != nil || !slices.Contains(lines, "planted") {
		t.Errorf("the first run did not plant the link: %q, %v", lines, err)
	}
	if cs, err := containersOf(name); err != nil || len(cs) != 1 {
		t.Errorf("the refused restart created containers: %d (%v), want only the first run's", len(cs), err)
	}

	podDir := filepath.Join(b.root, "pods", string(p.UID))
	b.removeManifest("planter.yaml")
	b.waitGone(name)
	b.waitFor("the pod directory "+podDir+" removed", waitTimeout, func() (bool, string) {
		_, err := os.Lstat(podDir)
		return os.IsNotExist(err), fmt.Sprintf("lstat: %v", err)
	})
	if mounts := mountsUnder(t, b.dir); len(mounts) > 0 {
		t.Errorf("mounts left under %s: %v", b.dir, mounts)
	}
	if got := treeOf(t, victim); !slices.Equal(got, want) {
		t.Errorf("victim directory changed: %v, want %v", got, want)
	}
	now, ok, detail := runtimeState(podName("bystander"), "main", "")
	if !ok || now.container.Id != bystander.container.Id {
		t.Errorf("the bystander pod was disturbed: %s", detail)
	}
}

// TestSubPathMounts: a subPath naming a directory (made in an emptyDir),
// one naming a file of a hostPath, and one naming a ConfigMap's key (a
// symbolic link into the volume's ..data, followed since it stays inside)
// work end to end, each through a bind mount under the pod's
// volume-subpaths directory; removing the pod unmounts them and removes
// the pod directory, and the files they showed stay.
func TestSubPathMounts(t *testing.T) {
	b := newBerth(t, berthOptions{noStart: true})
	host := filepath.Join(b.dir, "host")
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(host, "conf")
	if err := os.WriteFile(conf, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.waitReady()

	dir := v1.HostPathDirectory
	app := shContainer("app", "echo hi > /d/x; "+sleepForever)
	app.VolumeMounts = []v1.VolumeMount{
		{Name: "data", MountPath: "/d", SubPath: "dir/sub"},
		{Name: "host", MountPath: "/etc/app.conf", SubPath: "conf", ReadOnly: true},
		{Name: "cm", MountPath: "/etc/greeting", SubPath: "greeting"},
	}
	pod := newPod("subpaths", app)
	pod.Spec.Volumes = []v1.Volume{
		{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host, Type: &dir}}},
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "site"}}}},
	}
	const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site}\ndata: {greeting: hello-cm}\n---\n"
	b.writeManifest("subpaths.yaml", configMap+podManifest(pod))
	name := podName("subpaths")
	api := b.waitRunning(name)
	rt := b.waitRuntime(name, "app", api.UID)

	podDir := filepath.Join(b.root, "pods", string(api.UID))
	file := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "data", "dir", "sub", "x")
	b.waitFor("the container's file in its subPath "+file, waitTimeout, func() (bool, string) {
		data, err := os.ReadFile(file)
		if err != nil {
			return false, err.Error()
		}
		return string(data) == "hi\n", fmt.Sprintf("%q", data)
	})
	if got := execIn(t, rt.container.Id, "cat /etc/app.conf"); got != "hello" {
		t.Errorf("the file subPath reads %q, want hello", got)
	}
	if got := execIn(t, rt.container.Id, "echo x >> /etc/app.conf 2>/dev/null || echo ro"); got != "ro" {
		t.Errorf("the readOnly file subPath is writable: %q", got)
	}
	if got := execIn(t, rt.container.Id, "cat /etc/greeting"); got != "hello-cm" {
		t.Errorf("the ConfigMap key's subPath reads %q, want hello-cm", got)
	}
	wantMounts := []string{
		filepath.Join(podDir, "volume-subpaths", "cm", "app", "2"),
		filepath.Join(podDir, "volume-subpaths", "data", "app", "0"),
		filepath.Join(podDir, "volume-subpaths", "host", "app", "1"),
	}
	got := mountsUnder(t, podDir)
	slices.Sort(got)
	if !slices.Equal(got, wantMounts) {
		t.Errorf("mounts under the pod directory: %v, want %v", got, wantMounts)
	}

	b.removeManifest("subpaths.yaml")
	b.waitGone(name)
	b.waitFor("the pod directory "+podDir+" removed", waitTimeout, func() (bool, string) {
		_, err := os.Lstat(podDir)
		return os.IsNotExist(err), fmt.Sprintf("lstat: %v", err)
	})
	if mounts := mountsUnder(t, b.dir); len(mounts) > 0 {
		t.Errorf("mounts left under %s: %v", b.dir, mounts)
	}
	if data, err := os.ReadFile(conf); err != nil || string(data) != "hello\n" {
		t.Errorf("the hostPath's file after the pod went: %q, %v", data, err)
	}
}

// TestSubPathMountsAfterBerthDied: berth is killed while a pod with
// subPath bind mounts runs, and the pod's manifest goes while it is down;
// a pod directory of a pod the runtime no longer has is left with a bind
// mount of a host directory on one of its subPath mount points. The
// restarted berth removes the pod and both pod directories, unmounting
// the binds first: the host directories keep every file.
func TestSubPathMountsAfterBerthDied(t *testing.T) {
	b := newBerth(t, berthOptions{noStart: true})
	host := filepath.Join(b.dir, "host")
	if err := os.MkdirAll(filepath.Join(host, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "sub", "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := treeOf(t, host)

	leftover := filepath.Join(b.root, "pods", "0123-leftover")
	mp := filepath.Join(leftover, "volume-subpaths", "data", "app", "0")
	if err := os.MkdirAll(mp, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(filepath.Join(host, "sub"), mp, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mp, unix.MNT_DETACH) })

	b.start()
	b.waitReady()
	b.waitFor("the leftover pod directory removed", waitTimeout, func() (bool, string) {
		_, err := os.Lstat(leftover)
		return os.IsNotExist(err), fmt.Sprintf("lstat: %v", err)
	})
	if got := treeOf(t, host); !slices.Equal(got, want) {
		t.Errorf("host directory changed by the leftover's removal: %v, want %v", got, want)
	}

	dir := v1.HostPathDirectory
	app := shContainer("app", sleepForever)
	app.VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/h", SubPath: "sub"}}
	pod := newPod("orphaned", app)
	pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host, Type: &dir}}}}
	b.writeManifest("orphaned.yaml", podManifest(pod))
	name := podName("orphaned")
	api := b.waitRunning(name)
	b.waitRuntime(name, "app", api.UID)
	podDir := filepath.Join(b.root, "pods", string(api.UID))
	if got := mountsUnder(t, podDir); len(got) != 1 {
		t.Fatalf("mounts under the pod directory: %v, want the subPath's", got)
	}

	b.kill()
	b.removeManifest("orphaned.yaml")
	b.start()
	b.waitReady()
	b.waitGone(name)
	b.waitFor("the pod directory "+podDir+" removed", waitTimeout, func() (bool, string) {
		_, err := os.Lstat(podDir)
		return os.IsNotExist(err), fmt.Sprintf("lstat: %v", err)
	})
	if mounts := mountsUnder(t, b.dir); len(mounts) > 0 {
		t.Errorf("mounts left under %s: %v", b.dir, mounts)
	}
	if got := treeOf(t, host); !slices.Equal(got, want) {
		t.Errorf("host directory changed: %v, want %v", got, want)
	}
}
