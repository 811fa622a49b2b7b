package store

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Op is what a PodUpdate asks the agent to do with its pods.
type Op int

const (
	// OpAdd: pods the agent has not seen from this source.
	OpAdd Op = iota
	// OpUpdate: same UID, but spec, labels or annotations differ semantically.
	OpUpdate
	// OpRemove: pods the source no longer lists.
	OpRemove
	// OpReconcile: same UID and spec; only bookkeeping changed (for example
	// the config.seen annotation). The agent refreshes without restarting.
	OpReconcile
)

func (o Op) String() string {
	switch o {
	case OpAdd:
		return "ADD"
	case OpUpdate:
		return "UPDATE"
	case OpRemove:
		return "REMOVE"
	case OpReconcile:
		return "RECONCILE"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// PodUpdate is one incremental change to the pods of one source. Pods are
// fully defaulted and validated; the agent must not modify them.
type PodUpdate struct {
	Op     Op
	Source string
	Pods   []*v1.Pod
}
