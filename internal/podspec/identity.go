package podspec

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"net/url"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations berth puts on every pod it accepts. The kubernetes.io ones are
// the kubelet's, so tools that know static pods understand them.
const (
	// AnnotationHash is the pod's UID, as the kubelet's config.hash.
	AnnotationHash = "kubernetes.io/config.hash"
	// AnnotationSource is SourceFile or SourceHTTP.
	AnnotationSource = "kubernetes.io/config.source"
	// AnnotationSeen is when berth first saw this UID (RFC 3339, UTC). The
	// store sets it; it never changes for a UID.
	AnnotationSeen = "kubernetes.io/config.seen"
	// AnnotationOrigin is the file path or URL the pod was read from.
	AnnotationOrigin = "berth.io/config.origin"
)

// TimeFormatSeen is how config.seen is written: the kubelet's format.
const TimeFormatSeen = time.RFC3339Nano

// Origin says where a manifest came from; it is part of a pod's identity.
type Origin struct {
	Source string // SourceFile or SourceHTTP
	// Path is the file path, or the URL through RedactURL: what berth
	// prints and puts in berth.io/config.origin.
	Path string
	// identity, when set, is what the UID hashes in place of Path. A URL
	// source sets it to url.URL.Redacted(), what berth hashed before
	// RedactURL existed: changing it would give every URL pod a new UID,
	// and so a restart, on upgrade. It keeps the query, so a new ?token=
	// still means new pods, as it always did; a new password does not.
	identity string
}

// HTTPOrigin is the origin of the manifests served at u.
func HTTPOrigin(u *url.URL) Origin {
	return Origin{Source: SourceHTTP, Path: RedactURL(u.String()), identity: u.Redacted()}
}

// applyIdentity gives a decoded pod its static-pod identity, as the kubelet
// does: name suffixed with the node name, namespace "default", a UID that
// changes whenever the manifest's content, its origin or the node changes
// (unless metadata.uid is set), and the config annotations. It must run on
// the pod exactly as decoded, before API defaults, so that a comment-only
// edit or a newer berth with more defaults keeps the UID and the pod keeps
// running. key is the node's UID key (nil: an unkeyed hash, as berth
// validate shows). It returns the UID an earlier berth derived without the
// key when it differs from the one given ("" otherwise), for
// keepLegacyUIDs.
func applyIdentity(pod *v1.Pod, nodeName string, origin Origin, key []byte) (legacy types.UID) {
	if pod.UID == "" {
		pod.UID, legacy = contentUID(pod, nodeName, origin, key)
	}
	pod.Name = pod.Name + "-" + nodeName
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationHash] = string(pod.UID)
	pod.Annotations[AnnotationSource] = origin.Source
	pod.Annotations[AnnotationOrigin] = origin.Path
	return legacy
}

// contentUID hashes the node name, the origin and the canonical JSON of the
// decoded pod into 32 hex digits, the shape of the kubelet's config hash.
//
// With the node's key it is an HMAC-SHA256. The JSON holds what
// --listen-pods=redacted hides (environment values, commands, annotation
// values), while the UID is shown to every local user (in /pods, and as
// the name of the pod's directory under /var/log/pods): a plain hash would
// let anyone check guesses of a hidden value against it, and a short one
// (a PIN) falls to trying every candidate. legacy is then the plain hash,
// the UID berths before the key gave the same pod.
func contentUID(pod *v1.Pod, nodeName string, origin Origin, key []byte) (uid, legacy types.UID) {
	path := origin.Path
	if origin.identity != "" {
		path = origin.identity
	}
	// Marshalling a decoded v1.Pod cannot fail: every field is plain data.
	b, _ := json.Marshal(pod)
	sum := func(h hash.Hash) types.UID {
		for _, s := range []string{nodeName, origin.Source, path} {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
		h.Write(b)
		return types.UID(hex.EncodeToString(h.Sum(nil))[:32])
	}
	if key == nil {
		return sum(sha256.New()), ""
	}
	return sum(hmac.New(sha256.New, key)), sum(sha256.New())
}

// FullName is the pod's name_namespace, the key of static-pod exclusivity.
func FullName(pod *v1.Pod) string {
	return JoinFullName(pod.Name, pod.Namespace)
}

// JoinFullName is the full name of the pod with the given name and
// namespace: the one definition of the format, for what knows a pod by its
// name only (a manifest problem, a runtime object's labels).
func JoinFullName(name, namespace string) string {
	return name + "_" + namespace
}
