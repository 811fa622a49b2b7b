package podrules

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationCrashLoopBackoffMax is a pod's own crash-loop ceiling: a Go
// duration of at least a second, like the kubelet's
// crashLoopBackOff.maxContainerRestartPeriod (KEP-5593) but per pod. The
// runtime manager (kuberuntime.AnnotationCrashLoopBackoffMax, the same name) caps it
// at the node-wide --crashloop-backoff-max, which a manifest cannot raise.
const AnnotationCrashLoopBackoffMax = "berth.io/crashloop-backoff-max"

// minCrashLoopBackoffMax keeps a pod from asking for a hot restart loop.
const minCrashLoopBackoffMax = time.Second

// validateBerthAnnotations checks the annotations berth gives a meaning to.
func validateBerthAnnotations(annotations map[string]string, p *field.Path) field.ErrorList {
	v, ok := annotations[AnnotationCrashLoopBackoffMax]
	if !ok {
		return nil
	}
	ap := p.Key(AnnotationCrashLoopBackoffMax)
	d, err := time.ParseDuration(v)
	if err != nil {
		return field.ErrorList{field.Invalid(ap, v, "must be a duration such as 30s or 2m")}
	}
	if d < minCrashLoopBackoffMax {
		return field.ErrorList{field.Invalid(ap, v, fmt.Sprintf("must be at least %s", minCrashLoopBackoffMax))}
	}
	return nil
}
