package mirror

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionMirrored is False on a pod that gets no mirror pod, with the
// reason ReasonNodeRestriction and the reference that rules it out; pods
// with a mirror pod do not carry it.
const ConditionMirrored v1.PodConditionType = "berth.io/Mirrored"

// ReasonNodeRestriction is the reason of ConditionMirrored and of the
// event of a pod that gets no mirror pod.
const ReasonNodeRestriction = "NodeRestriction"

// Unmirrorable says why the NodeRestriction admission plugin would refuse
// pod's mirror pod, or "" when it would not: a node may not create a pod
// that references a service account, Secrets, ConfigMaps, persistent
// volume claims or resource claims, since it would read them with the
// node's credentials. Such a pod runs as any other; only its mirror is
// missing.
func Unmirrorable(pod *v1.Pod) string {
	ref := firstReference(&pod.Spec)
	if ref == "" {
		return ""
	}
	return fmt.Sprintf("no mirror pod in the API server: it references %s, and the NodeRestriction admission plugin refuses a node's pod that references Secrets, ConfigMaps, service accounts or volume claims", ref)
}

// Condition is ConditionMirrored of a pod that gets no mirror pod, and
// false for one that does.
func Condition(pod *v1.Pod, now time.Time) (v1.PodCondition, bool) {
	msg := Unmirrorable(pod)
	if msg == "" {
		return v1.PodCondition{}, false
	}
	return v1.PodCondition{
		Type: ConditionMirrored, Status: v1.ConditionFalse, Reason: ReasonNodeRestriction, Message: msg,
		LastTransitionTime: metav1.NewTime(now),
	}, true
}

// firstReference names the first reference NodeRestriction forbids, as
// its admitPodCreate checks them.
func firstReference(spec *v1.PodSpec) string {
	if spec.ServiceAccountName != "" {
		return fmt.Sprintf("service account %q", spec.ServiceAccountName)
	}
	for _, s := range spec.ImagePullSecrets {
		return fmt.Sprintf("image pull Secret %q", s.Name)
	}
	if len(spec.ResourceClaims) > 0 {
		return fmt.Sprintf("resource claim %q", spec.ResourceClaims[0].Name)
	}
	for _, vol := range spec.Volumes {
		if ref := volumeReference(vol); ref != "" {
			return ref
		}
	}
	for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if ref := containerReference(c.Name, c.Env, c.EnvFrom); ref != "" {
				return ref
			}
		}
	}
	for _, c := range spec.EphemeralContainers {
		if ref := containerReference(c.Name, c.Env, c.EnvFrom); ref != "" {
			return ref
		}
	}
	return ""
}

func volumeReference(vol v1.Volume) string {
	switch {
	case vol.Secret != nil:
		return fmt.Sprintf("Secret %q (volume %s)", vol.Secret.SecretName, vol.Name)
	case vol.ConfigMap != nil:
		return fmt.Sprintf("ConfigMap %q (volume %s)", vol.ConfigMap.Name, vol.Name)
	case vol.PersistentVolumeClaim != nil:
		return fmt.Sprintf("persistent volume claim %q (volume %s)", vol.PersistentVolumeClaim.ClaimName, vol.Name)
	case vol.Ephemeral != nil:
		return fmt.Sprintf("an ephemeral volume claim (volume %s)", vol.Name)
	case vol.CSI != nil && vol.CSI.NodePublishSecretRef != nil:
		return fmt.Sprintf("Secret %q (volume %s)", vol.CSI.NodePublishSecretRef.Name, vol.Name)
	case vol.Projected != nil:
		for _, src := range vol.Projected.Sources {
			switch {
			case src.Secret != nil:
				return fmt.Sprintf("Secret %q (volume %s)", src.Secret.Name, vol.Name)
			case src.ConfigMap != nil:
				return fmt.Sprintf("ConfigMap %q (volume %s)", src.ConfigMap.Name, vol.Name)
			case src.ClusterTrustBundle != nil:
				return fmt.Sprintf("a cluster trust bundle (volume %s)", vol.Name)
			case src.PodCertificate != nil:
				return fmt.Sprintf("a pod certificate (volume %s)", vol.Name)
			}
		}
	}
	return ""
}

func containerReference(name string, env []v1.EnvVar, envFrom []v1.EnvFromSource) string {
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			return fmt.Sprintf("Secret %q (container %s, env %s)", r.Name, name, e.Name)
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			return fmt.Sprintf("ConfigMap %q (container %s, env %s)", r.Name, name, e.Name)
		}
	}
	for _, e := range envFrom {
		if e.SecretRef != nil {
			return fmt.Sprintf("Secret %q (container %s, envFrom)", e.SecretRef.Name, name)
		}
		if e.ConfigMapRef != nil {
			return fmt.Sprintf("ConfigMap %q (container %s, envFrom)", e.ConfigMapRef.Name, name)
		}
	}
	return ""
}
