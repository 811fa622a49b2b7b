package podspec

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ObjectRef is one reference of a pod to a ConfigMap or Secret, as the
// API defines each: a volume, an env var's key, an envFrom, a pull secret.
type ObjectRef struct {
	Kind, Name string
	Field      string // the path of the name, for problems
	Optional   bool
	Keys       []KeyRef // keys that must exist unless optional
	// Env: the values become environment, and so part of the pod's UID:
	// one key (Keys[0]) or, for envFrom (EnvAll), all of them.
	Env, EnvAll bool
	Pull        bool // an imagePullSecrets entry
}

// KeyRef is a key an ObjectRef names, and the path of that name.
type KeyRef struct{ Key, Field string }

// ObjectRefs lists a pod's references to ConfigMaps and Secrets, in
// spec order.
func ObjectRefs(pod *v1.Pod) []ObjectRef {
	var refs []ObjectRef
	isTrue := func(b *bool) bool { return b != nil && *b }
	vols := field.NewPath("spec", "volumes")
	for i, vol := range pod.Spec.Volumes {
		vp := vols.Index(i)
		add := func(kind, name string, namePath *field.Path, optional *bool, items []v1.KeyToPath, itemsPath *field.Path) {
			r := ObjectRef{Kind: kind, Name: name, Field: namePath.String(), Optional: isTrue(optional)}
			for j, it := range items {
				r.Keys = append(r.Keys, KeyRef{Key: it.Key, Field: itemsPath.Index(j).Child("key").String()})
			}
			refs = append(refs, r)
		}
		if cm := vol.ConfigMap; cm != nil {
			add(KindConfigMap, cm.Name, vp.Child("configMap", "name"), cm.Optional, cm.Items, vp.Child("configMap", "items"))
		}
		if s := vol.Secret; s != nil {
			add(KindSecret, s.SecretName, vp.Child("secret", "secretName"), s.Optional, s.Items, vp.Child("secret", "items"))
		}
	}
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i := range list.cs {
			c := &list.cs[i]
			cp := field.NewPath("spec", list.name).Index(i)
			for j, ev := range c.Env {
				if ev.ValueFrom == nil {
					continue
				}
				vp := cp.Child("env").Index(j).Child("valueFrom")
				if r := ev.ValueFrom.ConfigMapKeyRef; r != nil {
					p := vp.Child("configMapKeyRef")
					refs = append(refs, ObjectRef{Kind: KindConfigMap, Name: r.Name, Field: p.Child("name").String(),
						Optional: isTrue(r.Optional), Env: true, Keys: []KeyRef{{r.Key, p.Child("key").String()}}})
				}
				if r := ev.ValueFrom.SecretKeyRef; r != nil {
					p := vp.Child("secretKeyRef")
					refs = append(refs, ObjectRef{Kind: KindSecret, Name: r.Name, Field: p.Child("name").String(),
						Optional: isTrue(r.Optional), Env: true, Keys: []KeyRef{{r.Key, p.Child("key").String()}}})
				}
			}
			for j, src := range c.EnvFrom {
				sp := cp.Child("envFrom").Index(j)
				if r := src.ConfigMapRef; r != nil {
					refs = append(refs, ObjectRef{Kind: KindConfigMap, Name: r.Name, Field: sp.Child("configMapRef", "name").String(),
						Optional: isTrue(r.Optional), Env: true, EnvAll: true})
				}
				if r := src.SecretRef; r != nil {
					refs = append(refs, ObjectRef{Kind: KindSecret, Name: r.Name, Field: sp.Child("secretRef", "name").String(),
						Optional: isTrue(r.Optional), Env: true, EnvAll: true})
				}
			}
		}
	}
	for i, ps := range pod.Spec.ImagePullSecrets {
		refs = append(refs, ObjectRef{Kind: KindSecret, Name: ps.Name, Pull: true,
			Field: field.NewPath("spec", "imagePullSecrets").Index(i).Child("name").String()})
	}
	return refs
}

// refLines finds the lines of a pod's references in its manifest, while
// the YAML is at hand: resolution happens later, across the source.
func refLines(pod *v1.Pod, d decoded) map[string]int {
	refs := ObjectRefs(pod)
	if len(refs) == 0 {
		return nil
	}
	lines := map[string]int{}
	for _, r := range refs {
		lines[r.Field] = lineOf(d.node, r.Field)
		for _, k := range r.Keys {
			lines[k.Field] = lineOf(d.node, k.Field)
		}
	}
	return lines
}
