package criconfig

import (
	"encoding/json"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
)

// HashContainer is a stable fingerprint of a container's spec, recorded on the
// runtime container (AnnotationContainerHash, in base 16) so a berth started
// later can tell whether a running container still matches its manifest and
// adopt it instead of restarting it.
//
// It is FNV-64a over the container's canonical JSON: encoding/json writes
// struct fields in declaration order and map keys sorted, and the API types
// omit unset optional fields, so the hash depends only on what the manifest
// says. It stays the same across berth restarts and across k8s.io/api
// upgrades that add fields the manifest does not use.
func HashContainer(c *v1.Container) uint64 {
	h := fnv.New64a()
	// Marshalling an API struct cannot fail: it has no channels, funcs or
	// cyclic pointers, and its custom marshallers (resource.Quantity,
	// intstr.IntOrString) never return errors.
	b, _ := json.Marshal(c)
	h.Write(b)
	return h.Sum64()
}
