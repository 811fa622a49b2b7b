package podrules

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateHostUsers checks hostUsers: false (user namespaces, KEP-127, GA
// in 1.36) as the API server does: a pod in its own user namespace shares
// none of the host's network, PID or IPC namespaces. Whether the runtime
// and kernel can give it one is only known at run time (internal/volumes/userns.go).
func validateHostUsers(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	if spec.HostUsers == nil || *spec.HostUsers {
		return nil
	}
	const why = "not allowed when hostUsers is false"
	var errs field.ErrorList
	if spec.HostNetwork {
		errs = append(errs, field.Forbidden(p.Child("hostNetwork"), why))
	}
	if spec.HostPID {
		errs = append(errs, field.Forbidden(p.Child("hostPID"), why))
	}
	if spec.HostIPC {
		errs = append(errs, field.Forbidden(p.Child("hostIPC"), why))
	}
	return errs
}
