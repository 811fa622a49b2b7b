package podrules

import (
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateObjectRefs checks the fields of a pod that reference ConfigMaps
// and Secrets as the API server does (validateConfigMapVolumeSource,
// validateSecretVolumeSource, validateEnvFrom, the key selectors): whether
// the objects exist is resolution's business (podsnapshot's resolve.go).
func validateObjectRefs(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, vol := range spec.Volumes {
		vp := p.Child("volumes").Index(i)
		if cm := vol.ConfigMap; cm != nil {
			cp := vp.Child("configMap")
			errs = append(errs, validateRefName(cm.Name, cp.Child("name"))...)
			errs = append(errs, validateVolumeFiles(cm.DefaultMode, cm.Items, cp)...)
		}
		if s := vol.Secret; s != nil {
			sp := vp.Child("secret")
			errs = append(errs, validateRefName(s.SecretName, sp.Child("secretName"))...)
			errs = append(errs, validateVolumeFiles(s.DefaultMode, s.Items, sp)...)
		}
	}
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range list.cs {
			c := &list.cs[i]
			cp := p.Child(list.name).Index(i)
			for j, ev := range c.Env {
				if ev.ValueFrom == nil {
					continue
				}
				vp := cp.Child("env").Index(j).Child("valueFrom")
				if r := ev.ValueFrom.ConfigMapKeyRef; r != nil {
					errs = append(errs, validateKeySelector(r.Name, r.Key, vp.Child("configMapKeyRef"))...)
				}
				if r := ev.ValueFrom.SecretKeyRef; r != nil {
					errs = append(errs, validateKeySelector(r.Name, r.Key, vp.Child("secretKeyRef"))...)
				}
			}
			for j, src := range c.EnvFrom {
				errs = append(errs, validateEnvFrom(src, cp.Child("envFrom").Index(j))...)
			}
		}
	}
	for i, ps := range spec.ImagePullSecrets {
		errs = append(errs, validateRefName(ps.Name, p.Child("imagePullSecrets").Index(i).Child("name"))...)
	}
	return errs
}

// validateRefName checks the name of a referenced ConfigMap or Secret: a
// DNS subdomain, as the object's own name must be.
func validateRefName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// validateKeySelector checks a configMapKeyRef or secretKeyRef.
func validateKeySelector(name, key string, p *field.Path) field.ErrorList {
	errs := validateRefName(name, p.Child("name"))
	if key == "" {
		return append(errs, field.Required(p.Child("key"), ""))
	}
	return append(errs, ValidateObjectKey(key, p.Child("key"))...)
}

// validateEnvFrom checks one envFrom source: exactly one of configMapRef
// and secretRef, and a prefix that keeps the names valid.
func validateEnvFrom(src v1.EnvFromSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.Prefix != "" {
		for _, msg := range validation.IsRelaxedEnvVarName(src.Prefix) {
			errs = append(errs, field.Invalid(p.Child("prefix"), src.Prefix, msg))
		}
	}
	switch {
	case src.ConfigMapRef != nil && src.SecretRef != nil:
		errs = append(errs, field.Invalid(p, "", "may not have more than one field specified at a time"))
	case src.ConfigMapRef != nil:
		errs = append(errs, validateRefName(src.ConfigMapRef.Name, p.Child("configMapRef", "name"))...)
	case src.SecretRef != nil:
		errs = append(errs, validateRefName(src.SecretRef.Name, p.Child("secretRef", "name"))...)
	default:
		errs = append(errs, field.Required(p, "must specify one of: `configMapRef` or `secretRef`"))
	}
	return errs
}

// validateVolumeFiles checks the modes and items of a configMap or secret
// volume: modes within 0777, item paths relative, without "..".
func validateVolumeFiles(defaultMode *int32, items []v1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateFileMode(defaultMode, p.Child("defaultMode"))...)
	for i, it := range items {
		ip := p.Child("items").Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(ip.Child("key"), ""))
		}
		errs = append(errs, validateItemPath(it.Path, ip.Child("path"))...)
		errs = append(errs, validateFileMode(it.Mode, ip.Child("mode"))...)
	}
	return errs
}

func validateFileMode(mode *int32, p *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > 0o777) {
		return field.ErrorList{field.Invalid(p, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

// validateItemPath is the API's validateLocalNonReservedPath: a relative
// path, no ".." element, not starting with "..".
func validateItemPath(target string, p *field.Path) field.ErrorList {
	switch {
	case target == "":
		return field.ErrorList{field.Required(p, "")}
	case path.IsAbs(target):
		return field.ErrorList{field.Invalid(p, target, "must be a relative path")}
	case strings.HasPrefix(target, ".."):
		return field.ErrorList{field.Invalid(p, target, "must not start with '..'")}
	}
	for _, elem := range strings.Split(target, "/") {
		if elem == ".." {
			return field.ErrorList{field.Invalid(p, target, "must not contain '..'")}
		}
	}
	return nil
}

// ValidateObjectKey checks a data key: the characters a file name in a
// volume may use (validation.IsConfigMapKey).
func ValidateObjectKey(k string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(k) {
		errs = append(errs, field.Invalid(p, k, msg))
	}
	return errs
}
