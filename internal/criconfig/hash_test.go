package criconfig

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func hashBase() *v1.Container {
	return &v1.Container{
		Name:    "app",
		Image:   "busybox:1.36",
		Command: []string{"sh", "-c"},
		Args:    []string{"sleep 3600"},
		Env:     []v1.EnvVar{{Name: "A", Value: "1"}},
		Ports:   []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}},
		Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
		},
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}
}

func TestHashContainerStable(t *testing.T) {
	// A literal pins the algorithm: if this changes, every running container
	// of every upgraded berth would be restarted as "changed".
	const pinned = uint64(0x52e85cd6e2e16083)
	a, b := HashContainer(hashBase()), HashContainer(hashBase())
	if a != b {
		t.Fatalf("hash differs across calls: %x != %x", a, b)
	}
	if a != pinned {
		t.Errorf("hash = %#x, want the pinned %#x", a, pinned)
	}
}

func TestHashContainerChangesWithAnyField(t *testing.T) {
	base := HashContainer(hashBase())
	tests := []struct {
		name   string
		mutate func(c *v1.Container)
	}{
		{"name", func(c *v1.Container) { c.Name = "other" }},
		{"image", func(c *v1.Container) { c.Image = "busybox:1.37" }},
		{"command", func(c *v1.Container) { c.Command = []string{"sh"} }},
		{"args", func(c *v1.Container) { c.Args = append(c.Args, "x") }},
		{"env value", func(c *v1.Container) { c.Env[0].Value = "2" }},
		{"env added", func(c *v1.Container) { c.Env = append(c.Env, v1.EnvVar{Name: "B"}) }},
		{"port", func(c *v1.Container) { c.Ports[0].HostPort = 8080 }},
		{"memory limit", func(c *v1.Container) {
			c.Resources.Limits[v1.ResourceMemory] = resource.MustParse("128Mi")
		}},
		{"mount read-only", func(c *v1.Container) { c.VolumeMounts[0].ReadOnly = true }},
		{"working dir", func(c *v1.Container) { c.WorkingDir = "/tmp" }},
		{"pull policy", func(c *v1.Container) { c.ImagePullPolicy = v1.PullAlways }},
		{"tty", func(c *v1.Container) { c.TTY = true }},
		{"security context", func(c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{Privileged: new(true)}
		}},
		{"probe", func(c *v1.Container) {
			c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := hashBase()
			tt.mutate(c)
			if got := HashContainer(c); got == base {
				t.Errorf("hash unchanged (%#x) after changing %s", got, tt.name)
			}
		})
	}
}
