package podenv

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
)

// PodObjects are the ConfigMaps and Secrets a pod references, from its own
// source and namespace (berth reads them from the manifests beside the
// pod; there is no API server). Only those that exist are present: an
// optional reference may find none. They are shared and never modified.
type PodObjects struct {
	ConfigMaps map[string]*v1.ConfigMap
	Secrets    map[string]*v1.Secret
}

// envFrom is the variables one envFrom source gives, in key order: every
// key of the ConfigMap's data or the Secret's data, with the prefix. A
// missing object gives none when the reference is optional and is an
// error otherwise (the kubelet's CreateContainerConfigError).
func (o PodObjects) envFrom(src v1.EnvFromSource) ([]Var, error) {
	var data map[string]string
	switch {
	case src.ConfigMapRef != nil:
		r := src.ConfigMapRef
		cm := o.ConfigMaps[r.Name]
		if cm == nil {
			if r.Optional != nil && *r.Optional {
				return nil, nil
			}
			return nil, fmt.Errorf("envFrom: ConfigMap %q not found", r.Name)
		}
		data = cm.Data
	case src.SecretRef != nil:
		r := src.SecretRef
		s := o.Secrets[r.Name]
		if s == nil {
			if r.Optional != nil && *r.Optional {
				return nil, nil
			}
			return nil, fmt.Errorf("envFrom: Secret %q not found", r.Name)
		}
		data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
	default:
		return nil, nil
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Var, 0, len(keys))
	for _, k := range keys {
		out = append(out, Var{Name: src.Prefix + k, Value: data[k]})
	}
	return out, nil
}

// keyRef is the value of a configMapKeyRef or secretKeyRef. ok is false
// when an optional reference finds no object or no key: the variable is
// then left unset, as the kubelet does. The error never quotes a value.
func (o PodObjects) keyRef(vf *v1.EnvVarSource) (value string, ok bool, err error) {
	var (
		kind, name, key string
		optional, found bool
	)
	if r := vf.ConfigMapKeyRef; r != nil {
		kind, name, key, optional = "ConfigMap", r.Name, r.Key, r.Optional != nil && *r.Optional
		if cm := o.ConfigMaps[name]; cm != nil {
			found = true
			if v, has := cm.Data[key]; has {
				return v, true, nil
			}
		}
	} else if r := vf.SecretKeyRef; r != nil {
		kind, name, key, optional = "Secret", r.Name, r.Key, r.Optional != nil && *r.Optional
		if s := o.Secrets[name]; s != nil {
			found = true
			if v, has := s.Data[key]; has {
				return string(v), true, nil
			}
		}
	}
	switch {
	case optional:
		return "", false, nil
	case !found:
		return "", false, fmt.Errorf("%s %q not found", kind, name)
	}
	return "", false, fmt.Errorf("%s %q has no key %q", kind, name, key)
}
