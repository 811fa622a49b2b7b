package podrules

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// defaultImageVolume fills an image volume's pullPolicy as the API server
// does for a container's image (KEP-4639, image volumes, GA in 1.36):
// Always for :latest or no tag, IfNotPresent otherwise.
func defaultImageVolume(iv *v1.ImageVolumeSource) {
	if iv.PullPolicy == "" {
		iv.PullPolicy = defaultPullPolicy(iv.Reference)
	}
}

// validateImageVolume checks an image volume as the API server does for a
// pod (KEP-4639): a pod's image volume needs a reference (only templates
// may leave it for a controller to fill), without surrounding blanks, and
// one of the pull policies. Whether the runtime can mount images is only
// known at run time (internal/kuberuntime/imagevolume.go).
func validateImageVolume(iv *v1.ImageVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch ref := iv.Reference; {
	case strings.TrimSpace(ref) == "":
		errs = append(errs, field.Required(p.Child("reference"), "an image volume needs an image reference"))
	case ref != strings.TrimSpace(ref):
		errs = append(errs, field.Invalid(p.Child("reference"), ref, "must not have leading or trailing whitespace"))
	}
	if !pullPolicies.Has(string(iv.PullPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("pullPolicy"), iv.PullPolicy, sets.List(pullPolicies)))
	}
	return errs
}
