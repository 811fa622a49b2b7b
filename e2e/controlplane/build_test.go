package controlplane

import (
	"slices"
	"testing"
)

func TestStagingModules(t *testing.T) {
	gomod := []byte(`module k8s.io/kubernetes

go 1.26.0

require k8s.io/api v0.0.0

replace k8s.io/kms => ./staging/src/k8s.io/kms

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	github.com/x/y => github.com/x/y v1.0.0
)
`)
	got := stagingModules(gomod)
	want := []string{"k8s.io/kms", "k8s.io/api", "k8s.io/client-go"}
	if !slices.Equal(got, want) {
		t.Errorf("stagingModules = %v, want %v", got, want)
	}
}

func TestVersionLDFlags(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"v1.36.3", "-X k8s.io/client-go/pkg/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitVersion=v1.36.3" +
			" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/component-base/version.gitMajor=1" +
			" -X k8s.io/client-go/pkg/version.gitMinor=36 -X k8s.io/component-base/version.gitMinor=36" +
			" -X k8s.io/client-go/pkg/version.gitTreeState=clean -X k8s.io/component-base/version.gitTreeState=clean"},
		{"v1.37.12", "-X k8s.io/client-go/pkg/version.gitVersion=v1.37.12 -X k8s.io/component-base/version.gitVersion=v1.37.12" +
			" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/component-base/version.gitMajor=1" +
			" -X k8s.io/client-go/pkg/version.gitMinor=37 -X k8s.io/component-base/version.gitMinor=37" +
			" -X k8s.io/client-go/pkg/version.gitTreeState=clean -X k8s.io/component-base/version.gitTreeState=clean"},
	} {
		if got := versionLDFlags(tc.version); got != tc.want {
			t.Errorf("versionLDFlags(%q) = %q, want %q", tc.version, got, tc.want)
		}
	}
}
