package podrules

import (
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationRollbackAfter overrides, for one pod, how long a new version of
// it may take to become Ready before berth rolls back to the last version
// that was Ready ("0" disables the rollback for this pod). The agent owns
// the behaviour; the manifest package only checks the value, so that a typo
// is a problem naming file, line and field instead of a silent default.
const AnnotationRollbackAfter = "berth.io/rollback-after"

// RollbackAfter returns the pod's berth.io/rollback-after as a duration,
// and whether the annotation is set. Only pods that passed validation reach
// the agent, so there the error is never seen.
func RollbackAfter(pod *v1.Pod) (time.Duration, bool, error) {
	s, ok := pod.Annotations[AnnotationRollbackAfter]
	if !ok {
		return 0, false, nil
	}
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, true, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, true, fmt.Errorf("not a duration such as 5m or 90s (0 disables the rollback): %w", err)
	case d < 0:
		return 0, true, errors.New("negative (0 disables the rollback)")
	}
	return d, true, nil
}

// validateRollbackAfter checks berth.io/rollback-after, when set.
func validateRollbackAfter(pod *v1.Pod, p *field.Path) field.ErrorList {
	if _, _, err := RollbackAfter(pod); err != nil {
		return field.ErrorList{field.Invalid(p.Key(AnnotationRollbackAfter), pod.Annotations[AnnotationRollbackAfter], err.Error())}
	}
	return nil
}
