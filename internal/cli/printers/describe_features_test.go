package printers

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestDescribeFeatures checks how describe shows an env var from a file
// (KEP-3721), an image volume (KEP-4639) and hostUsers: false.
func TestDescribeFeatures(t *testing.T) {
	no, yes := false, true
	pod := &v1.Pod{Spec: v1.PodSpec{
		HostUsers: &no,
		Containers: []v1.Container{{Name: "app", Env: []v1.EnvVar{
			{Name: "DB", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "cfg", Path: "app.env", Key: "DB_ADDRESS", Optional: &yes}}},
		}}},
		Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "data:1.0", PullPolicy: v1.PullIfNotPresent}}}},
	}}
	var b strings.Builder
	DescribePod(&b, pod, nil, time.Unix(0, 0))
	for _, want := range []string{
		"Host Users:   false (own user namespace)\n",
		"DB:    <set to the key 'DB_ADDRESS' in file 'app.env' of volume 'cfg'> Optional: true\n",
		"    Type:        Image (a container image or OCI artifact)\n    Reference:   data:1.0\n    PullPolicy:  IfNotPresent\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, b.String())
		}
	}
}
