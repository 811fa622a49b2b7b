package syncloop

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

const readySandbox = runtimeapi.PodSandboxState_SANDBOX_READY

// foreignSandboxConfig is a sandbox some other tool made: kubelet-style
// labels but no berth ownership label.
func foreignSandboxConfig() *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "other-node1", Namespace: "default", Uid: "foreign-uid"},
		Labels:   map[string]string{"io.kubernetes.pod.name": "other-node1", "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "foreign-uid"},
	}
}
