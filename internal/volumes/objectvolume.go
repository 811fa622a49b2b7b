package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podpath"
)

// Volume plugin directories of configMap and secret volumes under a pod's
// volumes directory, the kubelet's.
const (
	configMapPluginDir = "kubernetes.io~configmap"
	secretPluginDir    = "kubernetes.io~secret"
)

// Names inside an object volume, the kubelet's AtomicWriter layout: the
// files live in a timestamped directory, "..data" links to the current
// one, and each top-level name the pod sees links through "..data". A
// container therefore sees either the old set of files or the new one,
// never a mix, and a single rename switches them.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	tsDirLayout    = "..2006_01_02_15_04_05."
)

// objectFile is one file of an object volume: its path in the volume, its
// content and its mode.
type objectFile struct {
	data []byte
	mode os.FileMode
}

// objectVolumePayload computes the files of a configMap or secret volume
// from the pod's objects, as the kubelet does: every key as a file, or only
// the items listed (each with its own mode, else defaultMode). A missing
// object or key is an error unless the volume is optional; manifest
// resolution refuses such pods before they get here, so it only happens
// when the objects changed in between.
func objectVolumePayload(vol *v1.Volume, objs podenv.PodObjects) (map[string]objectFile, error) {
	var (
		kind, name  string
		optional    bool
		defaultMode *int32
		items       []v1.KeyToPath
		data        map[string][]byte
		found       bool
	)
	switch {
	case vol.ConfigMap != nil:
		cm := vol.ConfigMap
		kind, name, defaultMode, items = "ConfigMap", cm.Name, cm.DefaultMode, cm.Items
		optional = cm.Optional != nil && *cm.Optional
		if o := objs.ConfigMaps[name]; o != nil {
			found = true
			data = make(map[string][]byte, len(o.Data)+len(o.BinaryData))
			for k, v := range o.Data {
				data[k] = []byte(v)
			}
			for k, v := range o.BinaryData {
				data[k] = v
			}
		}
	case vol.Secret != nil:
		s := vol.Secret
		kind, name, defaultMode, items = "Secret", s.SecretName, s.DefaultMode, s.Items
		optional = s.Optional != nil && *s.Optional
		if o := objs.Secrets[name]; o != nil {
			found = true
			data = o.Data
		}
	default:
		return nil, fmt.Errorf("volume %q is neither a configMap nor a secret volume", vol.Name)
	}
	if !found && !optional {
		return nil, fmt.Errorf("%s volume %q: %s %q not found", strings.ToLower(kind[:1])+kind[1:], vol.Name, kind, name)
	}
	mode := os.FileMode(0o644)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode) & os.ModePerm
	}
	out := map[string]objectFile{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = objectFile{data: v, mode: mode}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("volume %q: %s %q has no key %q", vol.Name, kind, name, it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode) & os.ModePerm
		}
		out[filepath.Clean(it.Path)] = objectFile{data: v, mode: m}
	}
	return out, nil
}

// objectVolumePath is where a configMap or secret volume of the pod lives.
func (h *Host) objectVolumePath(uid types.UID, vol *v1.Volume) (string, error) {
	plugin := configMapPluginDir
	if vol.Secret != nil {
		plugin = secretPluginDir
	}
	return h.podSubdir(uid, "volumes", plugin, vol.Name)
}

// ensureObjectVolume sets up a configMap or secret volume, or brings its
// files up to date with the pod's objects; it is what SyncPod runs for
// every such volume on every sync, so an edit of a ConfigMap reaches the
// containers without a restart, as the kubelet's periodic remount does.
// A secret volume lives on a tmpfs, so its data never touches a disk.
func (h *Host) ensureObjectVolume(pod *v1.Pod, vol *v1.Volume) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("volume %q: %w", vol.Name, err)
	}
	dir, err := h.objectVolumePath(pod.UID, vol)
	if err != nil {
		return fail(err)
	}
	payload, err := objectVolumePayload(vol, h.Objects(pod.UID))
	if err != nil {
		return "", err
	}
	if err := podpath.MkdirAll(h.opts.RootDir, filepath.Dir(dir), 0o750); err != nil {
		return fail(err)
	}
	if err := podpath.MkdirAll(h.opts.RootDir, dir, 0o755); err != nil {
		return fail(err)
	}
	if vol.Secret != nil {
		mounted, err := isMountPoint(dir)
		if err != nil {
			return fail(err)
		}
		if !mounted {
			size, err := h.memoryVolumeSize(pod, &v1.EmptyDirVolumeSource{})
			if err != nil {
				return fail(err)
			}
			opts := fmt.Sprintf("mode=0755,size=%d", size)
			if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
				return fail(fmt.Errorf("mount tmpfs: %w", err))
			}
		}
	}
	var fsGroup *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		fsGroup = sc.FSGroup
	}
	if err := writeObjectFiles(dir, payload, fsGroup, h.clock.Now().UTC().Format(tsDirLayout)); err != nil {
		return fail(err)
	}
	return dir, nil
}

// Objects are the pod's ConfigMaps and Secrets, from Options.Objects.
func (h *Host) Objects(uid types.UID) podenv.PodObjects {
	if h.opts.Objects == nil {
		return podenv.PodObjects{}
	}
	return h.opts.Objects(uid)
}

// RefreshObjectVolumes updates the files of every configMap and secret
// volume the pod has already set up; volumes not set up yet are left to
// the container start that mounts them.
func (h *Host) RefreshObjectVolumes(pod *v1.Pod) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.ConfigMap == nil && vol.Secret == nil {
			continue
		}
		dir, err := h.objectVolumePath(pod.UID, vol)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, dataDirName)); err != nil {
			continue
		}
		if _, err := h.ensureObjectVolume(pod, vol); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeObjectFiles makes dir hold exactly payload, as the kubelet's AtomicWriter
// does: when the current files differ, the new ones are written into a new
// timestamped directory (prefix ts), "..data" is switched to it by one
// rename, the visible top-level links are added or removed, and the old
// directory goes. A payload equal to what is there writes nothing. A kill
// at any step leaves "..data" pointing at a complete set of files; the
// next call cleans up what the kill left. With fsGroup the files belong to
// that group and are readable by it, as the kubelet's volume ownership
// makes them.
func writeObjectFiles(dir string, payload map[string]objectFile, fsGroup *int64, ts string) error {
	for p := range payload {
		if err := checkPayloadPath(p); err != nil {
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if old != "" && samePayload(filepath.Join(dir, old), payload, fsGroup) {
		return removeStale(dir, old, payload)
	}
	tsDir, err := os.MkdirTemp(dir, ts)
	if err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return err
	}
	for p, f := range payload {
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		mode := fileMode(f.mode, fsGroup)
		if err := os.WriteFile(full, f.data, mode); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		// WriteFile's mode is cut by the umask.
		if err := os.Chmod(full, mode); err != nil {
			return err
		}
		if fsGroup != nil {
			if err := os.Lchown(full, -1, int(*fsGroup)); err != nil {
				return fmt.Errorf("give %s to fsGroup %d: %w", p, *fsGroup, err)
			}
		}
		fh, err := os.Open(full)
		if err == nil {
			err = fh.Sync()
			fh.Close()
		}
		if err != nil {
			return fmt.Errorf("sync %s: %w", p, err)
		}
	}
	tmpLink := filepath.Join(dir, newDataDirName)
	if err := os.Remove(tmpLink); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return fmt.Errorf("link the new data: %w", err)
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		return fmt.Errorf("switch to the new data: %w", err)
	}
	return removeStale(dir, filepath.Base(tsDir), payload)
}

// removeStale makes the visible links of dir those of payload, through
// "..data", and removes every timestamped directory but current.
func removeStale(dir, current string, payload map[string]objectFile) error {
	want := map[string]bool{}
	for p := range payload {
		want[strings.SplitN(p, "/", 2)[0]] = true
	}
	for name := range want {
		link := filepath.Join(dir, name)
		target := filepath.Join(dataDirName, name)
		if t, err := os.Readlink(link); err == nil && t == target {
			continue
		}
		if err := os.RemoveAll(link); err != nil {
			return err
		}
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == dataDirName || name == current || want[name]:
		case strings.HasPrefix(name, ".."):
			// An older timestamped directory, or a ..data_tmp a kill
			// left behind.
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return err
			}
		case e.Type()&fs.ModeSymlink != 0:
			// The link of a key the object no longer has.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// samePayload reports whether the data directory holds exactly payload,
// modes included.
func samePayload(dataDir string, payload map[string]objectFile, fsGroup *int64) bool {
	n := 0
	err := filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dataDir, p)
		f, ok := payload[rel]
		info, ierr := d.Info()
		if !ok || ierr != nil || !info.Mode().IsRegular() || info.Mode().Perm() != fileMode(f.mode, fsGroup) || info.Size() != int64(len(f.data)) {
			return fs.ErrInvalid
		}
		b, rerr := os.ReadFile(p)
		if rerr != nil || !bytes.Equal(b, f.data) {
			return fs.ErrInvalid
		}
		n++
		return nil
	})
	return err == nil && n == len(payload)
}

// fileMode is a payload file's mode on disk: with an fsGroup, readable by
// the group too (the kubelet's read-only volume ownership).
func fileMode(mode os.FileMode, fsGroup *int64) os.FileMode {
	if fsGroup != nil {
		mode |= 0o440
	}
	return mode
}

// checkPayloadPath refuses a file path that is not plainly inside the
// volume, or that would collide with the writer's own names. The manifest
// is validated already; this is the last line before writing as root.
func checkPayloadPath(p string) error {
	if p == "" || filepath.IsAbs(p) || p != filepath.Clean(p) || strings.HasPrefix(p, "..") || slices.Contains(strings.Split(p, "/"), "..") {
		return fmt.Errorf("file path %q must be relative, without \"..\"", p)
	}
	return nil
}
