//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPodFeatures runs the Kubernetes 1.34-1.36 pod fields berth honours
// on the real runtime, with one berth:
//   - envfile: an init container writes an env file into an emptyDir and
//     the app reads a key of it (KEP-3721), expands it into a later
//     variable, and goes without an optional key that is not there;
//   - envleak: the init container plants a symbolic link to a host file
//     instead: the app never starts (CreateContainerConfigError) and the
//     host file is never read;
//   - imgvol: an image volume (KEP-4639), mounted read-only on
//     containerd >= 2.1 and refused before any sandbox on older ones;
//   - userns: hostUsers: false, run in its own user namespace where the
//     runtime supports it, else refused with the reason before any
//     sandbox (the test beds' runc is Debian's 1.1: refused).
func TestPodFeatures(t *testing.T) {
	cfg := []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
	emptyDir := []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	yes, no := true, false
	fileRef := func(path, key string, optional *bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "cfg", Path: path, Key: key, Optional: optional}}
	}

	setup := shContainer("setup", `mkdir -p /cfg/sub && printf "# written by setup\nDB='db:5432'\nMULTI='a\nb'\n" > /cfg/sub/app.env && ln -s /etc/passwd /cfg/leak.env`)
	setup.VolumeMounts = cfg
	app := shContainer("app", `echo "DB=$DB G=$G OPT=${OPT-unset} LINES=$(echo "$MULTI" | wc -l)"; `+sleepForever)
	app.Env = []v1.EnvVar{
		{Name: "DB", ValueFrom: fileRef("sub/app.env", "DB", nil)},
		{Name: "G", Value: "$(DB)/x$$(DB)"},
		{Name: "OPT", ValueFrom: fileRef("sub/app.env", "NOT_THERE", &yes)},
		{Name: "MULTI", ValueFrom: fileRef("sub/app.env", "MULTI", nil)},
	}
	envfile := newPod("envfile", app)
	envfile.Spec.InitContainers = []v1.Container{setup}
	envfile.Spec.Volumes = emptyDir

	leakApp := shContainer("app", `echo "ROOT=$ROOT"; `+sleepForever)
	leakApp.Env = []v1.EnvVar{{Name: "ROOT", ValueFrom: fileRef("leak.env", "root", &yes)}}
	envleak := newPod("envleak", leakApp)
	envleak.Spec.InitContainers = []v1.Container{setup}
	envleak.Spec.Volumes = emptyDir

	imgApp := shContainer("app", `test -x /img/bin/busybox && echo image-mounted; touch /img/x 2>/dev/null || echo read-only; `+sleepForever)
	imgApp.VolumeMounts = []v1.VolumeMount{{Name: "img", MountPath: "/img"}}
	imgvol := newPod("imgvol", imgApp)
	imgvol.Spec.Volumes = []v1.Volume{{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "busybox:1.36", PullPolicy: v1.PullNever}}}}

	userns := newPod("userns", shContainer("app", "cat /proc/self/uid_map; "+sleepForever))
	userns.Spec.HostUsers = &no

	b := newBerth(t, berthOptions{manifests: map[string]string{
		"envfile.yaml": podManifest(envfile), "envleak.yaml": podManifest(envleak),
		"imgvol.yaml": podManifest(imgvol), "userns.yaml": podManifest(userns),
	}})
	b.waitReady()

	t.Run("envfile", func(t *testing.T) {
		defer b.use(t)()
		p := b.waitRunning(podName("envfile"))
		want := "DB=db:5432 G=db:5432/x$(DB) OPT=unset LINES=2"
		b.waitFor("the app's log to show its environment", waitTimeout, func() (bool, string) {
			lines, err := criLogLines(b.podLogPath(p, "app", 0))
			if err != nil {
				return false, err.Error()
			}
			return slices.Contains(lines, want), fmt.Sprintf("%q, want %q", lines, want)
		})
	})

	t.Run("envleak", func(t *testing.T) {
		defer b.use(t)()
		p := b.waitPod(podName("envleak"), "app waiting with CreateContainerConfigError", func(p *v1.Pod) bool {
			cs := containerStatus(p, "app")
			return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError"
		})
		msg := containerStatus(p, "app").State.Waiting.Message
		if !strings.Contains(msg, `env "ROOT": fileKeyRef: file "leak.env" in volume "cfg": the path leaves the volume`) {
			t.Errorf("waiting message %q does not say the path leaves the volume", msg)
		}
		if strings.Contains(msg, "root:x:0") {
			t.Errorf("the host's /etc/passwd leaked into the message: %q", msg)
		}
	})

	t.Run("imgvol", func(t *testing.T) {
		defer b.use(t)()
		name := podName("imgvol")
		if !bed.ContainerdAtLeast(2, 1) {
			b.waitFor("a FailedCreatePodSandBox event saying why", waitTimeout, func() (bool, string) {
				events, err := b.podEvents(name)
				if err != nil {
					return false, err.Error()
				}
				for _, e := range events {
					if e.Reason == "FailedCreatePodSandBox" && strings.Contains(e.Message, "spec.volumes[0].image: image volumes need containerd >= 2.1 (the runtime is containerd ") {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%v", events)
			})
			if sbs, err := sandboxesOf(name); err != nil || len(sbs) != 0 {
				t.Errorf("sandboxes of a refused pod: %v, %v", sbs, err)
			}
			return
		}
		p := b.waitRunning(name)
		b.waitFor("the app's log to show the image mounted read-only", waitTimeout, func() (bool, string) {
			lines, err := criLogLines(b.podLogPath(p, "app", 0))
			if err != nil {
				return false, err.Error()
			}
			return slices.Equal(lines, []string{"image-mounted", "read-only"}), fmt.Sprintf("%q", lines)
		})
		// Image GC keeps the volume's image: the container names it.
		cs, err := containersOf(name)
		if err != nil || len(cs) != 1 || !strings.HasPrefix(cs[0].Annotations["io.berth.image-volumes"], "sha256:") {
			t.Errorf("containers of imgvol: %v %v, want one naming its volume's image ID", cs, err)
		}
		out, err := exec.Command(berthBin, "describe", "imgvol", "--socket", b.socket).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Image (a container image or OCI artifact)") {
			t.Errorf("berth describe imgvol: %v\n%s", err, out)
		}
	})

	t.Run("userns", func(t *testing.T) {
		defer b.use(t)()
		name := podName("userns")
		if usernsSupported(t) {
			p := b.waitRunning(name)
			b.waitFor("the app's uid_map to show a mapped range", waitTimeout, func() (bool, string) {
				lines, err := criLogLines(b.podLogPath(p, "app", 0))
				if err != nil || len(lines) != 1 {
					return false, fmt.Sprint(lines, err)
				}
				f := strings.Fields(lines[0])
				return len(f) == 3 && f[0] == "0" && f[1] != "0" && f[2] == "65536", lines[0]
			})
			return
		}
		want := "spec.hostUsers: false: "
		b.waitFor("a FailedCreatePodSandBox event saying why", waitTimeout, func() (bool, string) {
			events, err := b.podEvents(name)
			if err != nil {
				return false, err.Error()
			}
			for _, e := range events {
				if e.Reason == "FailedCreatePodSandBox" && strings.Contains(e.Message, want) {
					return true, e.Message
				}
			}
			return false, fmt.Sprintf("%v", events)
		})
		if sbs, err := sandboxesOf(name); err != nil || len(sbs) != 0 {
			t.Errorf("sandboxes of a refused pod: %v, %v", sbs, err)
		}
	})
}

// usernsSupported asks the test bed's runtime whether its default handler
// can run pods in user namespaces (containerd >= 2.0 with runc >= 1.2;
// Debian 12's runc is 1.1, so today it cannot).
func usernsSupported(t *testing.T) bool {
	ctx, cancel := criCtx()
	defer cancel()
	resp, err := bed.Runtime().Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatalf("runtime status: %v", err)
	}
	for _, h := range resp.GetRuntimeHandlers() {
		if h.GetName() == "" {
			return h.GetFeatures().GetUserNamespaces()
		}
	}
	return false
}
