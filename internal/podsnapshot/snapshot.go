package podsnapshot

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podspec"
)

// Snapshot is the full state of one source at one moment. Sources send a
// snapshot after every change they notice; the store works out what changed.
type Snapshot struct {
	Source string
	// Pods is everything the source wants running now, defaulted and
	// validated, including last-known-good versions it keeps for manifests
	// that are currently broken.
	Pods []*v1.Pod
	// Problems are all the current problems of the source; they replace the
	// previous ones.
	Problems []podspec.Problem
	// Warnings are about pods berth runs all the same: fields it ignores
	// (podspec.ReasonIgnoredField) and host ports an earlier pod of the source
	// claims too (podspec.ReasonHostPortConflict).
	Warnings []podspec.Problem
	// Objects are the ConfigMaps and Secrets each pod references, by the
	// pod's UID; pods without references have none.
	Objects map[types.UID]*PodObjects
	// Failed means the source could not be read at all this time (directory
	// unreadable, URL unreachable). Pods still holds what the source keeps
	// from before. A failed snapshot does not count as the source's delivery
	// for SourcesReady.
	Failed bool
	// Version names the content the source last took, as its server
	// names it (the URL's ETag, else its Last-Modified); "" when none,
	// for the status report (internal/statusreport).
	Version string
}
