package podspec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podrules"
)

// CheckKeptPod verifies a pod berth persisted itself, outside the sources
// (the last Ready version a rollback runs again), before it is run after a
// restart: it must carry the static-pod identity of its origin on this
// node and still be valid, as a last good manifest must (the source's decodeState).
// Defaults added by a newer berth are filled in; the UID stays.
func CheckKeptPod(pod *v1.Pod, nodeName string) error {
	source, origin := pod.Annotations[AnnotationSource], pod.Annotations[AnnotationOrigin]
	if source != SourceFile && source != SourceHTTP {
		return fmt.Errorf("pod %q has no known source (%s %q)", pod.Name, AnnotationSource, source)
	}
	if origin == "" {
		return fmt.Errorf("pod %q has no %s", pod.Name, AnnotationOrigin)
	}
	if err := CheckIdentity(pod, source, origin, nodeName); err != nil {
		return err
	}
	podrules.Default(pod)
	if errs := append(podrules.Validate(pod), podrules.CheckStandalone(pod)...); len(errs) > 0 {
		return fmt.Errorf("pod %q: %w", pod.Name, errs.ToAggregate())
	}
	return nil
}

// CheckIdentity verifies a persisted pod carries the static-pod
// identity applyIdentity gives a pod of origin on this node.
func CheckIdentity(pod *v1.Pod, source, origin, nodeName string) error {
	switch {
	case pod.UID == "" || pod.Annotations[AnnotationHash] != string(pod.UID):
		return fmt.Errorf("uid %q does not match its %s annotation", pod.UID, AnnotationHash)
	case pod.Annotations[AnnotationSource] != source || pod.Annotations[AnnotationOrigin] != origin:
		return fmt.Errorf("pod %q was not read from %s", pod.Name, origin)
	case pod.Spec.NodeName != nodeName || !strings.HasSuffix(pod.Name, "-"+nodeName):
		return fmt.Errorf("pod %q is not of node %q", pod.Name, nodeName)
	}
	return nil
}
