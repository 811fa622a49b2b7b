package podrules

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CriticalPriority is system-cluster-critical's priority (the API
// server's SystemCriticalPriority): pods at or above it start first and
// briefly alone, and are stopped last at a node shutdown.
const CriticalPriority = 2000000000

// highestUserPriority is the largest priority a pod may have without one of
// the system classes (the API server's HighestUserDefinablePriority): the
// values above it are reserved for the pods a node cannot do without.
const highestUserPriority = int32(1000000000)

// validatePriority checks spec.priority against spec.priorityClassName the
// way the API server's Priority admission plugin does, so a manifest berth
// orders by priority is one a cluster would admit with the same value:
// a class must exist (without an API server only the two system classes
// do), and a priority given beside a class must be the class's value.
// Without a class the priority is taken as given (there is no default
// class to compute one from), but it may not climb into the range
// reserved for the system classes. Default has already filled a
// missing priority from the class.
func validatePriority(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	prio := int32(0)
	if spec.Priority != nil {
		prio = *spec.Priority
	}
	if spec.PriorityClassName == "" {
		if prio > highestUserPriority {
			errs = append(errs, field.Invalid(p.Child("priority"), prio,
				fmt.Sprintf("must not exceed %d without a priorityClassName: higher values are reserved for %s", highestUserPriority, strings.Join(systemClassNames(), " and "))))
		}
		return errs
	}
	want, ok := systemPriorities[spec.PriorityClassName]
	if !ok {
		return append(errs, field.NotFound(p.Child("priorityClassName"),
			spec.PriorityClassName+" (a standalone node has no API server to define priority classes; known: "+strings.Join(systemClassNames(), ", ")+")"))
	}
	if prio != want {
		errs = append(errs, field.Invalid(p.Child("priority"), prio,
			fmt.Sprintf("must not differ from the value of priorityClassName %s (%d); leave it out to have it filled in", spec.PriorityClassName, want)))
	}
	return errs
}

// systemClassNames lists the known classes in a stable order, for messages.
func systemClassNames() []string {
	names := make([]string, 0, len(systemPriorities))
	for n := range systemPriorities {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
