package controlplane

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// mirrorAnnotation marks a mirror pod, as the kubelet's mirror client sets it.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// MirrorPods lists the mirror pods bound to node: its pods that carry the
// mirror annotation.
func MirrorPods(ctx context.Context, cs kubernetes.Interface, node string) ([]v1.Pod, error) {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}
	var out []v1.Pod
	for _, p := range list.Items {
		if _, ok := p.Annotations[mirrorAnnotation]; ok {
			out = append(out, p)
		}
	}
	return out, nil
}
