package api

import (
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestContainerLogFileStaysUnderLogsDir: the log file a request reads is
// named after the pod's fields; fields that would climb out of the logs
// directory (a pod that got past validation) are refused, not read.
func TestContainerLogFileStaysUnderLogsDir(t *testing.T) {
	pod := func(ns, name, uid, container string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: container}}},
			Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
				Name: container, ContainerID: "containerd://abc", RestartCount: 2,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
			}}},
		}
	}
	logs := "/var/log/pods"
	for _, tt := range []struct {
		name string
		pod  *v1.Pod
		want string // "" when refused
	}{
		{"valid", pod("default", "web-node1", "0123abcd", "web"), filepath.Join(logs, "default_web-node1_0123abcd", "web", "2.log")},
		{"uid", pod("default", "web-node1", "../../../etc", "web"), ""},
		{"uid with an underscore", pod("default", "web", "x_y", "web"), ""},
		{"namespace", pod("..", "web-node1", "u", "web"), ""},
		{"name", pod("default", "a/../../b", "u", "web"), ""},
		{"container", pod("default", "web-node1", "u", ".."), ""},
		{"container with a slash", pod("default", "web-node1", "u", "../../../etc"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := containerLogFile(logs, tt.pod, tt.pod.Spec.Containers[0].Name, false)
			if tt.want == "" && err == nil {
				t.Errorf("containerLogFile = %q, want an error", got)
			}
			if tt.want != "" && (err != nil || got != tt.want) {
				t.Errorf("containerLogFile = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}
