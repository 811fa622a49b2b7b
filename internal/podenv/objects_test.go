package podenv

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestContainerEnvFromObjects(t *testing.T) {
	yes := true
	objs := PodObjects{
		ConfigMaps: map[string]*v1.ConfigMap{"app": {Data: map[string]string{"MODE": "fast", "LEVEL": "3"},
			BinaryData: map[string][]byte{"BLOB": {1}}}},
		Secrets: map[string]*v1.Secret{"db": {Data: map[string][]byte{"PASSWORD": []byte("hunter2"), "USER": []byte("app")}}},
	}
	cmRef := func(name, key string, optional bool) *v1.EnvVarSource {
		s := &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key}
		if optional {
			s.Optional = &yes
		}
		return &v1.EnvVarSource{ConfigMapKeyRef: s}
	}
	secRef := func(name, key string, optional bool) *v1.EnvVarSource {
		s := &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key}
		if optional {
			s.Optional = &yes
		}
		return &v1.EnvVarSource{SecretKeyRef: s}
	}
	tests := []struct {
		name    string
		envFrom []v1.EnvFromSource
		env     []v1.EnvVar
		want    []Var
		wantErr string
	}{
		{
			name:    "envFrom a ConfigMap: its data in key order, binaryData left out",
			envFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "app"}}}},
			want:    []Var{{"LEVEL", "3"}, {"MODE", "fast"}},
		},
		{
			name: "envFrom with a prefix, a later source overriding, env overriding both",
			envFrom: []v1.EnvFromSource{
				{Prefix: "X_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "app"}}},
				{Prefix: "X_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "db"}}},
			},
			env:  []v1.EnvVar{{Name: "X_MODE", Value: "$(X_USER)-slow"}},
			want: []Var{{"X_LEVEL", "3"}, {"X_MODE", "app-slow"}, {"X_PASSWORD", "hunter2"}, {"X_USER", "app"}},
		},
		{
			name:    "envFrom an optional missing ConfigMap gives nothing",
			envFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: &yes}}},
			env:     []v1.EnvVar{{Name: "A", Value: "a"}},
			want:    []Var{{"A", "a"}},
		},
		{
			name:    "envFrom a missing Secret",
			envFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}},
			wantErr: `envFrom: Secret "nope" not found`,
		},
		{
			name: "key refs, values never expanded",
			env: []v1.EnvVar{
				{Name: "LEVEL", Value: "x"},
				{Name: "M", ValueFrom: cmRef("app", "MODE", false)},
				{Name: "P", ValueFrom: secRef("db", "PASSWORD", false)},
				{Name: "E", Value: "$(P)"},
			},
			want: []Var{{"LEVEL", "x"}, {"M", "fast"}, {"P", "hunter2"}, {"E", "hunter2"}},
		},
		{
			name: "optional key refs to what is missing leave the variable unset",
			env: []v1.EnvVar{
				{Name: "A", ValueFrom: cmRef("app", "NOPE", true)},
				{Name: "B", ValueFrom: secRef("nope", "x", true)},
				{Name: "C", Value: "c"},
			},
			want: []Var{{"C", "c"}},
		},
		{
			name:    "a missing key",
			env:     []v1.EnvVar{{Name: "A", ValueFrom: cmRef("app", "NOPE", false)}},
			wantErr: `env "A": ConfigMap "app" has no key "NOPE"`,
		},
		{
			name:    "a binaryData key is no env value",
			env:     []v1.EnvVar{{Name: "A", ValueFrom: cmRef("app", "BLOB", false)}},
			wantErr: `env "A": ConfigMap "app" has no key "BLOB"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := envPod()
			c := &pod.Spec.Containers[0]
			c.Env, c.EnvFrom = tt.env, tt.envFrom
			got, err := Resolve(Context{Pod: pod, Container: c, Objects: objs})
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
