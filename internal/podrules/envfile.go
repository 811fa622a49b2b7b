package podrules

import (
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxEnvFileKeyLength bounds fileKeyRef.key as the API server does
// (KEP-3721: 128 characters).
const maxEnvFileKeyLength = 128

// validateFileKeyRefs checks every env[].valueFrom.fileKeyRef of the pod's
// containers the way the API server does for KEP-3721 (environment from
// files, beta in 1.35): volumeName names an emptyDir volume of the pod,
// path is relative and stays inside it, key is a non-empty printable name
// without '=' of at most 128 characters. Reading the file is the runtime
// side's business, when the container starts (internal/volumes/envfile.go).
func validateFileKeyRefs(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	emptyDirs := map[string]bool{}
	for _, v := range spec.Volumes {
		emptyDirs[v.Name] = v.EmptyDir != nil
	}
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range list.cs {
			for j, ev := range list.cs[i].Env {
				if ev.ValueFrom == nil || ev.ValueFrom.FileKeyRef == nil {
					continue
				}
				fp := p.Child(list.name).Index(i).Child("env").Index(j).Child("valueFrom", "fileKeyRef")
				errs = append(errs, validateFileKeyRef(ev.ValueFrom.FileKeyRef, fp, emptyDirs)...)
			}
		}
	}
	return errs
}

func validateFileKeyRef(ref *v1.FileKeySelector, p *field.Path, emptyDirs map[string]bool) field.ErrorList {
	var errs field.ErrorList
	switch isEmptyDir, ok := emptyDirs[ref.VolumeName]; {
	case ref.VolumeName == "":
		errs = append(errs, field.Required(p.Child("volumeName"), ""))
	case !ok:
		errs = append(errs, field.NotFound(p.Child("volumeName"), ref.VolumeName))
	case !isEmptyDir:
		errs = append(errs, field.Invalid(p.Child("volumeName"), ref.VolumeName, "must name an emptyDir volume"))
	}
	switch {
	case ref.Path == "":
		errs = append(errs, field.Required(p.Child("path"), ""))
	case path.IsAbs(ref.Path):
		errs = append(errs, field.Invalid(p.Child("path"), ref.Path, "must be a relative path"))
	case hasBackstep(ref.Path):
		errs = append(errs, field.Invalid(p.Child("path"), ref.Path, "must not contain '..'"))
	}
	switch {
	case ref.Key == "":
		errs = append(errs, field.Required(p.Child("key"), ""))
	case len(ref.Key) > maxEnvFileKeyLength:
		errs = append(errs, field.TooLong(p.Child("key"), "", maxEnvFileKeyLength))
	default:
		for _, msg := range validation.IsRelaxedEnvVarName(ref.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), ref.Key, msg))
		}
	}
	return errs
}

// hasBackstep reports whether a relative path has a ".." element, which
// the API server refuses in paths inside volumes.
func hasBackstep(p string) bool {
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return true
		}
	}
	return false
}
