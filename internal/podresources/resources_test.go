package podresources

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestQOSClassAndOOMScoreAdj(t *testing.T) {
	q := resource.MustParse
	facts := NodeFacts{Allocatable: v1.ResourceList{v1.ResourceMemory: q("8Gi")}, MinOOMScoreAdj: -999}
	tests := []struct {
		name string
		res  []v1.ResourceRequirements
		qos  v1.PodQOSClass
		adj  int64 // of the first container
	}{
		{"nothing set", []v1.ResourceRequirements{{}}, v1.PodQOSBestEffort, 1000},
		{"only ephemeral storage", []v1.ResourceRequirements{{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: q("1Gi")}}}, v1.PodQOSBestEffort, 1000},
		{"limits only", []v1.ResourceRequirements{{Limits: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}}}, v1.PodQOSGuaranteed, -997},
		{"requests equal limits", []v1.ResourceRequirements{{
			Requests: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")},
		}}, v1.PodQOSGuaranteed, -997},
		{"requests below limits", []v1.ResourceRequirements{{
			Requests: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("2Gi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("4Gi")},
		}}, v1.PodQOSBurstable, 750},
		{"one container unlimited", []v1.ResourceRequirements{
			{Limits: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}}, {},
		}, v1.PodQOSBurstable, 999},
		{"burstable asking for all memory", []v1.ResourceRequirements{{Requests: v1.ResourceList{v1.ResourceMemory: q("8Gi")}}}, v1.PodQOSBurstable, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{}
			for i, r := range tt.res {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: strconv.Itoa(i), Resources: r})
			}
			if got := QOSClass(pod); got != tt.qos {
				t.Errorf("QoS = %s, want %s", got, tt.qos)
			}
			if got := OOMScoreAdj(pod, &pod.Spec.Containers[0], facts); got != tt.adj {
				t.Errorf("oom_score_adj = %d, want %d", got, tt.adj)
			}
		})
	}
}
