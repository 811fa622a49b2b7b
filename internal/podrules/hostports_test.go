package podrules

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func portPod(hostNetwork bool, containers ...[]v1.ContainerPort) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web-n1", "default", "0b5c1c2e-5f2f-4c7e-9a47-0d1f0e6c8a11"
	pod.Spec.HostNetwork = hostNetwork
	for i, ports := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Image: "nginx:1", Ports: ports})
	}
	Default(pod)
	return pod
}

// TestValidateHostPorts: the API server's rule, a Duplicate value at the
// second claim of one PROTOCOL/HOSTIP/PORT among the app containers.
func TestValidateHostPorts(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{"distinct ports", portPod(false, []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}, []v1.ContainerPort{{ContainerPort: 80, HostPort: 8081}}), nil},
		{"same port across containers", portPod(false, []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}, []v1.ContainerPort{{ContainerPort: 81, HostPort: 8080}}),
			[]string{`spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"`}},
		{"same port within a container", portPod(false, []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 81, HostPort: 8080}}),
			[]string{`spec.containers[0].ports[1].hostPort: Duplicate value: "TCP//8080"`}},
		{"other protocol", portPod(false, []v1.ContainerPort{{ContainerPort: 53, HostPort: 53}, {ContainerPort: 53, HostPort: 53, Protocol: v1.ProtocolUDP}}), nil},
		{"other host IP", portPod(false, []v1.ContainerPort{{ContainerPort: 80, HostPort: 80, HostIP: "127.0.0.1"}}, []v1.ContainerPort{{ContainerPort: 80, HostPort: 80, HostIP: "127.0.0.2"}}), nil},
		{"hostNetwork container ports", portPod(true, []v1.ContainerPort{{ContainerPort: 9000}}, []v1.ContainerPort{{ContainerPort: 9000}}),
			[]string{`spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//9000"`}},
		{"no host port", portPod(false, []v1.ContainerPort{{ContainerPort: 80}}, []v1.ContainerPort{{ContainerPort: 80}}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range Validate(tt.pod) {
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Validate = %q, want %q", got, tt.want)
			}
		})
	}
	init := portPod(false, []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}})
	init.Spec.InitContainers = []v1.Container{{Name: "i", Image: "busybox:1", Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}}}
	Default(init)
	if errs := validateHostPorts(&init.Spec, field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("an init container's hostPort, which is never mapped, clashed: %v", errs)
	}
}

// TestHostPortClashes: claims clash as the scheduler's NodePorts filter
// judges them.
func TestHostPortClashes(t *testing.T) {
	tests := []struct {
		a, b HostPort
		want bool
	}{
		{HostPort{Port: 80}, HostPort{Protocol: v1.ProtocolTCP, IP: "0.0.0.0", Port: 80}, true},
		{HostPort{Port: 80}, HostPort{Port: 81}, false},
		{HostPort{Port: 80}, HostPort{Protocol: v1.ProtocolUDP, Port: 80}, false},
		{HostPort{IP: "127.0.0.1", Port: 80}, HostPort{Port: 80}, true},
		{HostPort{IP: "127.0.0.1", Port: 80}, HostPort{IP: "127.0.0.2", Port: 80}, false},
		{HostPort{IP: "127.0.0.1", Port: 80}, HostPort{IP: "127.0.0.1", Port: 80}, true},
	}
	for _, tt := range tests {
		if got := tt.a.Clashes(tt.b); got != tt.want {
			t.Errorf("%v clashes with %v = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := tt.b.Clashes(tt.a); got != tt.want {
			t.Errorf("%v clashes with %v = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
	pod := portPod(true, []v1.ContainerPort{{ContainerPort: 9000}}, []v1.ContainerPort{{ContainerPort: 53, Protocol: v1.ProtocolUDP}})
	want := []HostPort{
		{Protocol: v1.ProtocolTCP, Port: 9000, Field: "spec.containers[0].ports[0].hostPort"},
		{Protocol: v1.ProtocolUDP, Port: 53, Field: "spec.containers[1].ports[0].hostPort"},
	}
	if got := HostPorts(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("HostPorts of a hostNetwork pod = %+v, want %+v", got, want)
	}
}

// TestIgnoredFields: a set field the registry calls Ignored is a warning
// worded by its class; fields the API defaults and values that ask for
// what berth does are not.
func TestIgnoredFields(t *testing.T) {
	f := false
	deadline := int64(60)
	tests := []struct {
		name string
		edit func(*v1.Pod)
		want []Warning
	}{
		{"nothing ignored", func(*v1.Pod) {}, nil},
		{"scheduling fields", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
			p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		}, []Warning{
			{"spec.nodeSelector", "ignored: berth runs the pod on this node without scheduling"},
			{"spec.tolerations", "ignored: berth runs the pod on this node without scheduling"},
		}},
		{"other classes", func(p *v1.Pod) {
			p.Spec.ActiveDeadlineSeconds = &deadline
			p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "busybox:1", SecurityContext: &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}}}
		}, []Warning{
			{"spec.activeDeadlineSeconds", "ignored: validated only"},
			{"spec.initContainers[0].securityContext.appArmorProfile", "ignored: berth does not apply it yet"},
		}},
		{"as berth does", func(p *v1.Pod) {
			p.Spec.OS = &v1.PodOS{Name: v1.Linux}
			p.Spec.EnableServiceLinks = &f
		}, nil},
		{"empty lists", func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx:1"}}}}
			tt.edit(pod)
			if got := IgnoredFields(pod); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("IgnoredFields = %+v, want %+v", got, tt.want)
			}
		})
	}
}
