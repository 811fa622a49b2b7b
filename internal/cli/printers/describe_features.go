package printers

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// fileKeyRefValue is how describe shows an env var read from a file
// (KEP-3721), in kubectl's words for keys of ConfigMaps.
func fileKeyRefValue(ref *v1.FileKeySelector) string {
	s := fmt.Sprintf("<set to the key '%s' in file '%s' of volume '%s'>", ref.Key, ref.Path, ref.VolumeName)
	if ref.Optional != nil && *ref.Optional {
		s += " Optional: true"
	}
	return s
}

// imageVolume shows an image volume (KEP-4639) as kubectl does.
func (d *describer) imageVolume(iv *v1.ImageVolumeSource) {
	d.line(2, "Type", "Image (a container image or OCI artifact)")
	d.line(2, "Reference", iv.Reference)
	d.line(2, "PullPolicy", string(iv.PullPolicy))
}

// hostUsers says when the pod runs in its own user namespace
// (hostUsers: false): the one fact of it a reader cannot see elsewhere.
func (d *describer) hostUsers(spec *v1.PodSpec) {
	if spec.HostUsers != nil && !*spec.HostUsers {
		d.line(0, "Host Users", "false (own user namespace)")
	}
}
