package printers

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDescribeObjects: the ConfigMaps and Secrets a pod references are
// named, as kubectl names them; values are never at hand to print.
func TestDescribeObjects(t *testing.T) {
	yes := true
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default"},
		Spec: v1.PodSpec{
			ImagePullSecrets: []v1.LocalObjectReference{{Name: "regcred"}, {Name: "other"}},
			Containers: []v1.Container{{
				Name: "main", Image: "busybox",
				EnvFrom: []v1.EnvFromSource{
					{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "envs"}}},
					{Prefix: "DB_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Optional: &yes}},
				},
				Env: []v1.EnvVar{
					{Name: "MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "envs"}, Key: "mode"}}},
					{Name: "PW", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "password"}}},
				},
			}},
			Volumes: []v1.Volume{
				{Name: "files", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "files"}}}},
				{Name: "certs", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "tls", Optional: &yes}}},
			},
		},
	}
	var b strings.Builder
	DescribePod(&b, pod, nil, time.Now())
	// Columns are aligned by a tabwriter: compare with single spaces.
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"Environment Variables from:",
		"envs: ConfigMap with prefix ''  Optional: false",
		"db: Secret with prefix 'DB_'  Optional: true",
		"MODE:  <set to the key 'mode' of config map 'envs'>  Optional: false",
		"PW:    <set to the key 'password' in secret 'db'>  Optional: false",
		"Type:        ConfigMap (a volume populated by a ConfigMap)",
		"Name:        files",
		"Type:        Secret (a volume populated by a Secret)",
		"SecretName:  tls",
		"Optional:    true",
		"Image Pull Secrets:  regcred, other",
	} {
		if want = strings.Join(strings.Fields(want), " "); !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
}
