package criconfig

import (
	"errors"
	"regexp"
	"strings"
)

// imageReference is the grammar of a container image reference
// (distribution/reference): optional registry host with port, lower-case
// path components, optional tag, optional digest.
var imageReference = regexp.MustCompile(`^` +
	`((?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/|\[[a-fA-F0-9:]+\](?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*)*)` +
	`(?::([\w][\w.-]{0,127}))?` +
	`(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}))?` +
	`$`)

// ApplyDefaultTag validates an image reference and adds ":latest" when it
// has neither tag nor digest, as the kubelet does before asking the runtime.
// It returns the reference's tag and digest as written.
func ApplyDefaultTag(image string) (ref, tag, digest string, err error) {
	parts := imageReference.FindStringSubmatch(image)
	if parts == nil {
		return "", "", "", errors.New("not a valid image reference")
	}
	if len(parts[1]) > 255 {
		return "", "", "", errors.New("repository name longer than 255 characters")
	}
	tag, digest = parts[2], parts[3]
	if tag == "" && digest == "" {
		return image + ":latest", "", "", nil
	}
	return image, tag, digest, nil
}

// Repository is the normalized repository of an image reference, the
// kubelet's (ParseImageName): "busybox:1.36" is
// "docker.io/library/busybox".
func Repository(image string) string {
	parts := imageReference.FindStringSubmatch(image)
	if parts == nil {
		return image
	}
	repo := parts[1]
	host, rest, found := strings.Cut(repo, "/")
	if !found || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		if !found {
			return "docker.io/library/" + repo
		}
		return "docker.io/" + repo
	}
	return host + "/" + rest
}

// NormalizedName is the name containerd's CRI gives the image a reference
// names, ApplyDefaultTag's reference with its repository normalized:
// "busybox:1.36" is "docker.io/library/busybox:1.36". An invalid reference
// is an error.
func NormalizedName(image string) (string, error) {
	ref, tag, digest, err := ApplyDefaultTag(image)
	if err != nil {
		return "", err
	}
	name := Repository(ref)
	if tag != "" || digest == "" {
		if tag == "" {
			tag = "latest"
		}
		name += ":" + tag
	}
	if digest != "" {
		name += "@" + digest
	}
	return name, nil
}
