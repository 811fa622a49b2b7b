package testbed

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PushPaddedBusybox pushes to the bed's registry, as name:tag, a busybox
// image like the bed's own with a file /pad of padBytes bytes that do not
// compress: a stand-in for an application image's size, which a pull
// through a slow link takes time to fetch. The bytes are the same for the
// same size, so pushing again changes nothing. It returns the image's
// reference in the registry (Registry + "/" + name + ":" + tag). The bed
// must have a registry without authentication.
func (b *Bed) PushPaddedBusybox(name, tag string, padBytes int) (string, error) {
	if b.Registry == "" || b.registryAuth != nil {
		return "", fmt.Errorf("push %s: the bed has no registry without authentication", name)
	}
	binary, err := os.ReadFile("/usr/bin/busybox")
	if err != nil {
		return "", fmt.Errorf("push %s: read busybox binary: %w", name, err)
	}
	applets, err := listApplets("/usr/bin/busybox")
	if err != nil {
		return "", fmt.Errorf("push %s: %w", name, err)
	}
	ref := b.Registry + "/" + name + ":" + tag
	spec := busyboxSpec(binary, applets)
	spec.Ref, spec.Tag = ref, tag
	pad := make([]byte, padBytes)
	rng := rand.NewChaCha8([32]byte{'b', 'e', 'r', 't', 'h'})
	_, _ = rng.Read(pad) // ChaCha8.Read never fails
	spec.Files = append(spec.Files, fileEntry{Path: "pad", Mode: 0o644, Data: pad})
	img, err := spec.build()
	if err != nil {
		return "", fmt.Errorf("push %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := writeLayout(&buf, img); err != nil {
		return "", fmt.Errorf("push %s: %w", name, err)
	}
	archive := filepath.Join(b.path("tmp"), "padded-"+strings.ReplaceAll(name, "/", "-")+".tar")
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("push %s: %w", name, err)
	}
	defer os.Remove(archive)
	cmd := exec.Command("skopeo", "--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false", "oci-archive:"+archive+":"+tag, "docker://"+ref)
	cmd.Env = append(os.Environ(), "TMPDIR="+b.path("tmp"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("push %s: %w: %s", ref, err, out)
	}
	return ref, nil
}

// AllowPlainHTTP makes the bed's containerd pull from a registry at host
// (a proxy in front of the bed's registry, say) over plain HTTP, as it
// does from the bed's own registry. containerd reads it at the next pull;
// a CRI-O bed refuses.
func (b *Bed) AllowPlainHTTP(host string) error {
	if b.version.CRIO {
		return fmt.Errorf("plain HTTP to %s: CRI-O reads its registries at start only", host)
	}
	dir := b.path("certs.d", host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create hosts dir of %s: %w", host, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), registryHostsTOML(host), 0o644); err != nil {
		return fmt.Errorf("write hosts.toml of %s: %w", host, err)
	}
	return nil
}
