package podrules

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// supportedVolumes are the volume types a node without an API server can
// provide, the ones the field registry (fields.go) says berth honours:
// hostPath, emptyDir, image (KEP-4639, pulled like container images; the
// runtime must be able to mount them, internal/kuberuntime/imagevolume.go), and configMap
// and secret, which take the objects of the pod's own source. Everything
// else needs objects (claims, tokens) or drivers that only a cluster has.
var supportedVolumes = func() map[string]bool {
	const prefix = "spec.volumes[*]."
	m := map[string]bool{}
	for path, e := range podFields {
		if name, ok := strings.CutPrefix(path, prefix); ok && e.support == Honoured {
			m[name] = true
		}
	}
	return m
}()

// CheckStandalone rejects what a valid pod may ask for but a standalone node
// cannot honour, each with the reason and what to do instead. Accepting
// such a pod would start it half-working, which is worse than refusing.
func CheckStandalone(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := &pod.Spec
	p := field.NewPath("spec")
	for i := range spec.Volumes {
		for _, name := range volumeSourceNames(&spec.Volumes[i].VolumeSource) {
			if !supportedVolumes[name] {
				errs = append(errs, field.Forbidden(p.Child("volumes").Index(i).Child(name), volumeAdvice(name)))
			}
		}
	}
	if sa := saName(spec); sa != "" && (spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken) {
		f := "serviceAccountName"
		if spec.ServiceAccountName == "" {
			f = "serviceAccount"
		}
		errs = append(errs, field.Forbidden(p.Child(f),
			"a service account token comes from an API server, which a standalone node has none of; remove it or set automountServiceAccountToken: false"))
	}
	if len(spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(p.Child("ephemeralContainers"), "ephemeral containers are added through an API server; a manifest cannot declare them"))
	}
	if len(spec.ResourceClaims) > 0 {
		errs = append(errs, field.Forbidden(p.Child("resourceClaims"), "dynamic resource allocation needs an API server and a DRA driver"))
	}
	return errs
}

func saName(spec *v1.PodSpec) string {
	if spec.ServiceAccountName != "" {
		return spec.ServiceAccountName
	}
	return spec.DeprecatedServiceAccount
}

// volumeAdvice explains why a volume type is refused and what works instead.
func volumeAdvice(name string) string {
	switch name {
	case "persistentVolumeClaim", "ephemeral":
		return name + " volumes need an API server to bind claims, which a standalone node has none of; use a hostPath volume"
	case "projected":
		return "projected volumes (service-account tokens, ConfigMaps, Secrets) need an API server, which a standalone node has none of; use configMap and secret volumes of local objects, or a hostPath volume"
	}
	return name + " volumes are not supported by berth on a standalone node; supported types are hostPath, emptyDir, image, configMap and secret"
}
