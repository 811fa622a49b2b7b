package criconfig

import (
	"context"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/volumes"
)

func TestUsernsConfigs(t *testing.T) {
	m, _ := newCfgBuilder(t, Options{})
	// No subordinate ranges for berth: the default range, from 1<<31.
	dir := t.TempDir()
	m.vols = volumes.New(volumes.Options{RootDir: m.opts.RootDir, PodLogsDir: m.opts.PodLogsDir,
		SubIDFiles: [2]string{filepath.Join(dir, "subuid"), filepath.Join(dir, "subgid")}})
	pod := sbPod()
	no := false
	pod.Spec.HostUsers = &no
	sb, err := m.SandboxConfig(pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD,
		Uids: []*runtimeapi.IDMapping{{HostId: 1 << 31, Length: 65536}},
		Gids: []*runtimeapi.IDMapping{{HostId: 1 << 31, Length: 65536}}}
	if got := sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got.String() != want.String() {
		t.Errorf("sandbox userns = %v, want %v", got, want)
	}
	cc, err := m.ContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, nil, "busybox")
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got.String() != want.String() {
		t.Errorf("container userns = %v, want %v", got, want)
	}
	// The host's user namespace: no options, as before.
	plain := sbPod()
	plain.UID = "other"
	sb, err = m.SandboxConfig(plain, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got != nil {
		t.Errorf("userns of a hostUsers pod = %v, want none", got)
	}
}
