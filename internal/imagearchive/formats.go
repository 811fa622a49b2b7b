package imagearchive

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// dockerManifest is one image of a docker archive's manifest.json.
type dockerManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// imageConfig is what Read checks of an image config: its layers' diff IDs.
type imageConfig struct {
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// manifest is an OCI image manifest or a Docker schema 2 manifest.
type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// index is an OCI image index (index.json among them) or a Docker
// manifest list.
type index struct {
	SchemaVersion int `json:"schemaVersion"`
	MediaType     string
	Manifests     []struct {
		Descriptor
		Annotations map[string]string `json:"annotations"`
	} `json:"manifests"`
}

// jsonDoc is the JSON document at an entry, decoded into v.
func jsonDoc(entries map[string]*entry, name string, v any) (*entry, error) {
	e, ok := entries[name]
	if !ok {
		return nil, fmt.Errorf("%s: missing", name)
	}
	if e.data == nil {
		return nil, fmt.Errorf("%s: not a JSON document of at most the JSON limit", name)
	}
	if err := json.Unmarshal(e.data, v); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return e, nil
}

// blobs collects an archive's blobs once each, in the order added.
type blobs struct {
	list []Blob
	seen map[string]bool
}

func (bs *blobs) add(b Blob) {
	if bs.seen == nil {
		bs.seen = map[string]bool{}
	}
	if !bs.seen[b.Digest] {
		bs.seen[b.Digest] = true
		bs.list = append(bs.list, b)
	}
}

// readDocker reads a `docker save` archive: each image of manifest.json
// gets a Docker schema 2 manifest written here, over its config and
// layers as the archive holds them; each layer must match its diff ID in
// the config, plain or gzip.
func (a *Archive) readDocker(entries map[string]*entry) error {
	var images []dockerManifest
	if _, err := jsonDoc(entries, "manifest.json", &images); err != nil {
		return err
	}
	if len(images) == 0 {
		return fmt.Errorf("manifest.json: no image")
	}
	var bs blobs
	for i, img := range images {
		where := fmt.Sprintf("manifest.json: image %d", i)
		if len(img.RepoTags) == 0 {
			return fmt.Errorf("%s: no RepoTags to name it by", where)
		}
		cfgName, err := cleanName(img.Config)
		if err != nil {
			return fmt.Errorf("%s: Config: %w", where, err)
		}
		var cfg imageConfig
		cfgEntry, err := jsonDoc(entries, cfgName, &cfg)
		if err != nil {
			return fmt.Errorf("%s: Config: %w", where, err)
		}
		if len(cfg.RootFS.DiffIDs) != len(img.Layers) {
			return fmt.Errorf("%s: %d layers, but its config %s lists %d diff IDs", where, len(img.Layers), cfgName, len(cfg.RootFS.DiffIDs))
		}
		m := manifest{SchemaVersion: 2, MediaType: MediaTypeDockerManifest,
			Config: Descriptor{MediaType: MediaTypeDockerConfig, Digest: cfgEntry.digest, Size: cfgEntry.size}}
		top := Blob{Refs: []string{cfgEntry.digest}, RefKinds: []string{"config"}}
		for j, l := range img.Layers {
			name, err := cleanName(l)
			if err != nil {
				return fmt.Errorf("%s: layer %d: %w", where, j, err)
			}
			e, ok := entries[name]
			if !ok {
				return fmt.Errorf("%s: layer %d: %s: missing", where, j, name)
			}
			diffID := cfg.RootFS.DiffIDs[j]
			mt := MediaTypeDockerLayer
			switch diffID {
			case e.digest:
			case e.gunzipped:
				mt = MediaTypeDockerLayerGz
			default:
				return fmt.Errorf("%s: layer %d: %s has digest %s, not the diff ID %s its config names", where, j, name, e.digest, diffID)
			}
			d := Descriptor{MediaType: mt, Digest: e.digest, Size: e.size}
			m.Layers = append(m.Layers, d)
			bs.add(Blob{Descriptor: d, Uncompressed: diffID, entry: e.name})
			top.Refs = append(top.Refs, e.digest)
			top.RefKinds = append(top.RefKinds, fmt.Sprintf("l.%d", j))
		}
		bs.add(Blob{Descriptor: m.Config, Data: cfgEntry.data})
		data, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		top.Descriptor = Descriptor{MediaType: MediaTypeDockerManifest, Digest: digestOf(data), Size: int64(len(data))}
		top.Data = data
		bs.add(top)
		a.Images = append(a.Images, Image{Names: img.RepoTags, Target: top.Descriptor})
	}
	a.Blobs = bs.list
	return nil
}

// maxIndexDepth bounds indexes within indexes.
const maxIndexDepth = 4

// readOCI reads an OCI image layout: each manifest of index.json named by
// io.containerd.image.name or a full org.opencontainers.image.ref.name is
// an image; every blob it reaches must be in blobs/ under its digest and
// of the size its descriptor gives.
func (a *Archive) readOCI(entries map[string]*entry) error {
	var idx index
	if _, err := jsonDoc(entries, "index.json", &idx); err != nil {
		return err
	}
	if len(idx.Manifests) == 0 {
		return fmt.Errorf("index.json: no image")
	}
	var bs blobs
	for i, m := range idx.Manifests {
		name := m.Annotations["io.containerd.image.name"]
		if name == "" {
			name = m.Annotations["org.opencontainers.image.ref.name"]
		}
		if name == "" || !strings.ContainsAny(name, "/:") {
			return fmt.Errorf("index.json: manifest %d: no image name (annotation io.containerd.image.name, or a full reference in org.opencontainers.image.ref.name)", i)
		}
		if err := walkOCI(entries, m.Descriptor, 0, &bs); err != nil {
			return fmt.Errorf("index.json: manifest %d (%s): %w", i, name, err)
		}
		a.Images = append(a.Images, Image{Names: []string{name}, Target: m.Descriptor})
	}
	a.Blobs = bs.list
	return nil
}

// blobEntry is the layout's entry of a descriptor's blob, checked against
// the descriptor's digest and size.
func blobEntry(entries map[string]*entry, d Descriptor) (string, *entry, error) {
	alg, hexDigest, ok := strings.Cut(d.Digest, ":")
	if !ok || alg != "sha256" || len(hexDigest) != 64 || strings.Trim(hexDigest, "0123456789abcdef") != "" {
		return "", nil, fmt.Errorf("digest %q: not a sha256 digest", d.Digest)
	}
	name := "blobs/sha256/" + hexDigest
	e, ok := entries[name]
	if !ok {
		return name, nil, fmt.Errorf("blob %s: missing", d.Digest)
	}
	if e.digest != d.Digest {
		return name, nil, fmt.Errorf("blob %s: its content has digest %s", d.Digest, e.digest)
	}
	if e.size != d.Size {
		return name, nil, fmt.Errorf("blob %s: %d bytes, its descriptor says %d", d.Digest, e.size, d.Size)
	}
	return name, e, nil
}

// walkOCI checks the manifest or index d and everything it reaches, and
// adds them to bs, children first. An index's manifests for other
// platforms may be absent (a single-platform copy of a multi-platform
// image), but not all of them.
func walkOCI(entries map[string]*entry, d Descriptor, depth int, bs *blobs) error {
	name, e, err := blobEntry(entries, d)
	if err != nil {
		return err
	}
	if e.data == nil {
		return fmt.Errorf("blob %s: not a JSON document of at most the JSON limit", d.Digest)
	}
	switch d.MediaType {
	case MediaTypeOCIIndex, MediaTypeDockerList:
		if depth >= maxIndexDepth {
			return fmt.Errorf("indexes nested more than %d deep", maxIndexDepth)
		}
		var idx index
		if _, err := jsonDoc(entries, name, &idx); err != nil {
			return err
		}
		b := Blob{Descriptor: d, Data: e.data}
		var present int
		for i, m := range idx.Manifests {
			if _, ok := entries["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")]; !ok {
				continue
			}
			if err := walkOCI(entries, m.Descriptor, depth+1, bs); err != nil {
				return fmt.Errorf("manifest %d: %w", i, err)
			}
			present++
			b.Refs = append(b.Refs, m.Digest)
			b.RefKinds = append(b.RefKinds, fmt.Sprintf("m.%d", i))
		}
		if present == 0 {
			return fmt.Errorf("index %s: none of its manifests is in the archive", d.Digest)
		}
		bs.add(b)
		return nil
	case MediaTypeOCIManifest, MediaTypeDockerManifest:
	default:
		return fmt.Errorf("blob %s: media type %q is neither an image manifest nor an index", d.Digest, d.MediaType)
	}
	var m manifest
	if _, err := jsonDoc(entries, name, &m); err != nil {
		return err
	}
	_, ce, err := blobEntry(entries, m.Config)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var cfg imageConfig
	if ce.data == nil || json.Unmarshal(ce.data, &cfg) != nil {
		return fmt.Errorf("config %s: not an image config", m.Config.Digest)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return fmt.Errorf("%d layers, but its config lists %d diff IDs", len(m.Layers), len(cfg.RootFS.DiffIDs))
	}
	b := Blob{Descriptor: d, Data: e.data, Refs: []string{m.Config.Digest}, RefKinds: []string{"config"}}
	for i, l := range m.Layers {
		lname, le, err := blobEntry(entries, l)
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		// A plain layer is its own diff ID and a gzip one decompresses to
		// it; a zstd layer is checked by the runtime when it unpacks it.
		diffID := cfg.RootFS.DiffIDs[i]
		if diffID != le.digest && diffID != le.gunzipped && !strings.Contains(l.MediaType, "zstd") {
			return fmt.Errorf("layer %d: blob %s is not the diff ID %s its config names", i, l.Digest, diffID)
		}
		bs.add(Blob{Descriptor: l, Uncompressed: diffID, entry: lname})
		b.Refs = append(b.Refs, l.Digest)
		b.RefKinds = append(b.RefKinds, fmt.Sprintf("l.%d", i))
	}
	bs.add(Blob{Descriptor: m.Config, Data: ce.data})
	bs.add(b)
	return nil
}

// digestOf is the sha256 digest of data.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
