package podenv

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "B": "bee", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "a"},
		{"x$(A)y$(B)z", "xaybeez"},
		{"$(EMPTY)!", "!"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$a"},
		{"$$", "$"},
		{"cost: 5$", "cost: 5$"},
		{"$A", "$A"},
		{"$(A", "$(A"},
		{"$()", "$()"},
		{"a$(A)$(", "aa$("},
		{"$(A)$(B)", "abee"},
		// An unclosed "$(" is kept, and what follows is still expanded,
		// as the kubelet's expansion does.
		{"$(A$$", "$(A$"},
		{"$(A$$(B", "$(A$(B"},
		{"$(($(A)", "$(($(A)"},
		{"$(A $(B)", "$(A $(B)"},
	}
	for _, tt := range tests {
		if got := Expand(tt.in, lookup); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func envPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-node1", Namespace: "prod", UID: "uid-9",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"owner": "ops"},
		},
		Spec: v1.PodSpec{
			NodeName:           "node1",
			ServiceAccountName: "robot",
			Containers: []v1.Container{{
				Name: "app",
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("128Mi")},
				},
			}, {
				Name: "side",
			}},
		},
	}
}

func field(path string) *v1.EnvVarSource {
	return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
}

func resField(container, res, divisor string) *v1.EnvVarSource {
	s := &v1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		s.Divisor = resource.MustParse(divisor)
	}
	return &v1.EnvVarSource{ResourceFieldRef: s}
}

func TestContainerEnv(t *testing.T) {
	alloc := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	tests := []struct {
		name      string
		container string // default "app"
		env       []v1.EnvVar
		podIPs    []string
		want      []Var
		wantErr   string
	}{
		{
			name: "literal and expansion of earlier vars only",
			env: []v1.EnvVar{
				{Name: "A", Value: "x"},
				{Name: "B", Value: "$(A)-$(C)"},
				{Name: "C", Value: "c"},
				{Name: "D", Value: "$$(A) $(A)$(A)"},
			},
			want: []Var{{"A", "x"}, {"B", "x-$(C)"}, {"C", "c"}, {"D", "$(A) xx"}},
		},
		{
			name: "redefinition replaces in place",
			env:  []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "A", Value: "$(A)3"}},
			want: []Var{{"A", "13"}, {"B", "2"}},
		},
		{
			name:   "downward API fields",
			podIPs: []string{"10.88.0.7", "fd00::7"},
			env: []v1.EnvVar{
				{Name: "NAME", ValueFrom: field("metadata.name")},
				{Name: "NS", ValueFrom: field("metadata.namespace")},
				{Name: "UID", ValueFrom: field("metadata.uid")},
				{Name: "APP", ValueFrom: field("metadata.labels['app']")},
				{Name: "TIER", ValueFrom: field(`metadata.labels["tier"]`)},
				{Name: "NOLABEL", ValueFrom: field("metadata.labels['nope']")},
				{Name: "OWNER", ValueFrom: field("metadata.annotations['owner']")},
				{Name: "NODE", ValueFrom: field("spec.nodeName")},
				{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
				{Name: "IP", ValueFrom: field("status.podIP")},
				{Name: "IPS", ValueFrom: field("status.podIPs")},
				{Name: "HOST", ValueFrom: field("status.hostIP")},
				{Name: "HOSTS", ValueFrom: field("status.hostIPs")},
				{Name: "MSG", Value: "$(NAME) on $(NODE)"},
			},
			want: []Var{
				{"NAME", "web-node1"}, {"NS", "prod"}, {"UID", "uid-9"}, {"APP", "web"}, {"TIER", "front"},
				{"NOLABEL", ""}, {"OWNER", "ops"}, {"NODE", "node1"}, {"SA", "robot"},
				{"IP", "10.88.0.7"}, {"IPS", "10.88.0.7,fd00::7"}, {"HOST", "192.168.1.10"}, {"HOSTS", "192.168.1.10"},
				{"MSG", "web-node1 on node1"},
			},
		},
		{
			name: "pod IP before the sandbox has one is empty",
			env:  []v1.EnvVar{{Name: "IP", ValueFrom: field("status.podIP")}},
			want: []Var{{"IP", ""}},
		},
		{
			name: "resource fields with divisors, rounded up",
			env: []v1.EnvVar{
				{Name: "CPU_LIMIT", ValueFrom: resField("", "limits.cpu", "")},
				{Name: "CPU_LIMIT_M", ValueFrom: resField("", "limits.cpu", "1m")},
				{Name: "CPU_REQ", ValueFrom: resField("", "requests.cpu", "")},
				{Name: "CPU_REQ_M", ValueFrom: resField("app", "requests.cpu", "1m")},
				{Name: "MEM_LIMIT", ValueFrom: resField("", "limits.memory", "")},
				{Name: "MEM_LIMIT_MI", ValueFrom: resField("", "limits.memory", "1Mi")},
				{Name: "MEM_REQ_MI", ValueFrom: resField("", "requests.memory", "1Mi")},
			},
			want: []Var{
				{"CPU_LIMIT", "2"}, {"CPU_LIMIT_M", "1500"}, {"CPU_REQ", "1"}, {"CPU_REQ_M", "250"},
				{"MEM_LIMIT", "134217728"}, {"MEM_LIMIT_MI", "128"}, {"MEM_REQ_MI", "64"},
			},
		},
		{
			name:      "no limits: node allocatable; no requests: zero",
			container: "side",
			env: []v1.EnvVar{
				{Name: "CPU_LIMIT", ValueFrom: resField("", "limits.cpu", "")},
				{Name: "MEM_LIMIT_GI", ValueFrom: resField("", "limits.memory", "1Gi")},
				{Name: "EPH_LIMIT_GI", ValueFrom: resField("", "limits.ephemeral-storage", "1Gi")},
				{Name: "CPU_REQ", ValueFrom: resField("", "requests.cpu", "1m")},
				{Name: "MEM_REQ", ValueFrom: resField("", "requests.memory", "")},
			},
			want: []Var{{"CPU_LIMIT", "4"}, {"MEM_LIMIT_GI", "8"}, {"EPH_LIMIT_GI", "100"}, {"CPU_REQ", "0"}, {"MEM_REQ", "0"}},
		},
		{
			name:      "another container's resources",
			container: "side",
			env:       []v1.EnvVar{{Name: "APP_MEM", ValueFrom: resField("app", "limits.memory", "1Mi")}},
			want:      []Var{{"APP_MEM", "128"}},
		},
		{
			name:    "unknown field path",
			env:     []v1.EnvVar{{Name: "X", ValueFrom: field("spec.hostname")}},
			wantErr: `env "X": fieldRef "spec.hostname" is not supported`,
		},
		{
			name:    "malformed label subscript",
			env:     []v1.EnvVar{{Name: "X", ValueFrom: field("metadata.labels[app]")}},
			wantErr: `env "X": fieldRef "metadata.labels[app]" is not supported`,
		},
		{
			name: "fieldRef apiVersion other than v1",
			env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
				FieldRef: &v1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}}},
			wantErr: `env "X": fieldRef apiVersion "v2" is not supported (only v1)`,
		},
		{
			name:    "unknown resource",
			env:     []v1.EnvVar{{Name: "X", ValueFrom: resField("", "limits.gpu", "")}},
			wantErr: `env "X": resourceFieldRef resource "limits.gpu" is not supported`,
		},
		{
			name:    "resource of a container not in the pod",
			env:     []v1.EnvVar{{Name: "X", ValueFrom: resField("ghost", "limits.cpu", "")}},
			wantErr: `env "X": resourceFieldRef names container "ghost", which is not in the pod`,
		},
		{
			name: "fileKeyRef value, not expanded, seen by later vars",
			env: []v1.EnvVar{
				{Name: "A", Value: "x"},
				{Name: "F", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "cfg", Path: "e.env", Key: "DB"}}},
				{Name: "G", Value: "$(F)/$(A)"},
			},
			want: []Var{{"A", "x"}, {"F", "$(A)db"}, {"G", "$(A)db/x"}},
		},
		{
			name: "optional fileKeyRef absent: not set",
			env: []v1.EnvVar{
				{Name: "F", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "cfg", Path: "e.env", Key: "NONE"}}},
				{Name: "G", Value: "<$(F)>"},
			},
			want: []Var{{"G", "<$(F)>"}},
		},
		{
			name: "fileKeyRef failure",
			env: []v1.EnvVar{
				{Name: "F", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "cfg", Path: "e.env", Key: "BAD"}}},
			},
			wantErr: `env "F": broken`,
		},
		{
			name: "secretKeyRef of a Secret the pod does not have",
			env: []v1.EnvVar{{Name: "PW", ValueFrom: &v1.EnvVarSource{
				SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "pw"}}}},
			wantErr: `env "PW": Secret "db" not found`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := envPod()
			name := tt.container
			if name == "" {
				name = "app"
			}
			c := SpecContainer(pod, name)
			c.Env = tt.env
			fileKey := func(ref *v1.FileKeySelector) (string, bool, error) {
				switch ref.Key {
				case "DB":
					return "$(A)db", true, nil
				case "BAD":
					return "", false, errors.New("broken")
				}
				return "", false, nil
			}
			got, err := Resolve(Context{Pod: pod, Container: c, PodIPs: tt.podIPs, HostIP: "192.168.1.10", Allocatable: alloc, FileKey: fileKey})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("env = %v\nwant  %v", got, tt.want)
			}
		})
	}
}

func TestExpandSubPath(t *testing.T) {
	env := []Var{{"POD", "web"}, {"EMPTY", ""}}
	tests := []struct{ expr, want, wantErr string }{
		{expr: "logs/$(POD)", want: "logs/web"},
		{expr: "$$(POD)", want: "$(POD)"},
		{expr: "logs/$(MISSING)", wantErr: `subPathExpr "logs/$(MISSING)": missing value for MISSING`},
		{expr: "$(EMPTY)/$(NOPE)/$(EMPTY)", wantErr: `missing value for EMPTY, NOPE`},
	}
	for _, tt := range tests {
		got, err := ExpandSubPath(tt.expr, env)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ExpandSubPath(%q) err = %v, want %q", tt.expr, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ExpandSubPath(%q) = %q, %v; want %q", tt.expr, got, err, tt.want)
		}
	}
}
