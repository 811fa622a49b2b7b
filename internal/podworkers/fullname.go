package podworkers

import "k8s.io/apimachinery/pkg/types"

// fullNameGate enforces static-pod full-name exclusivity: at most one UID per
// full name (name_namespace) is started at a time. A new UID with a taken
// full name queues FIFO until the holder has fully terminated; a queued UID
// that is withdrawn before its turn never starts.
//
// It is not safe for concurrent use: the pod workers' mutex guards it.
type fullNameGate struct {
	started map[string]types.UID
	waiting map[string][]types.UID
}

func newFullNameGate() *fullNameGate {
	return &fullNameGate{started: map[string]types.UID{}, waiting: map[string][]types.UID{}}
}

// tryStart reports whether uid may run now under fullName. A UID that may not
// is queued (once) and gets its turn when release makes it the front.
func (g *fullNameGate) tryStart(fullName string, uid types.UID) bool {
	if holder, ok := g.started[fullName]; ok {
		if holder != uid {
			g.enqueue(fullName, uid)
		}
		return holder == uid
	}
	queue := g.waiting[fullName]
	if len(queue) > 0 && queue[0] != uid {
		g.enqueue(fullName, uid)
		return false
	}
	g.withdraw(fullName, uid)
	g.started[fullName] = uid
	return true
}

// Hold marks uid as the started holder of fullName without queueing, for pods
// found already running in the runtime at start-up (adoption, orphans).
// It returns false if another UID already holds the name.
func (g *fullNameGate) hold(fullName string, uid types.UID) bool {
	if holder, ok := g.started[fullName]; ok {
		return holder == uid
	}
	g.started[fullName] = uid
	return true
}

// release frees fullName if uid holds it, and withdraws uid from the queue.
// It returns the UID now at the front of the queue (to be woken), or "".
func (g *fullNameGate) release(fullName string, uid types.UID) types.UID {
	if g.started[fullName] == uid {
		delete(g.started, fullName)
	}
	g.withdraw(fullName, uid)
	if _, held := g.started[fullName]; held {
		return ""
	}
	if queue := g.waiting[fullName]; len(queue) > 0 {
		return queue[0]
	}
	return ""
}

// holder is the UID currently started under fullName, if any.
func (g *fullNameGate) holder(fullName string) (types.UID, bool) {
	uid, ok := g.started[fullName]
	return uid, ok
}

// waiters are the UIDs queued behind fullName's holder, front first; the
// slice is the caller's.
func (g *fullNameGate) waiters(fullName string) []types.UID {
	return append([]types.UID(nil), g.waiting[fullName]...)
}

func (g *fullNameGate) enqueue(fullName string, uid types.UID) {
	for _, w := range g.waiting[fullName] {
		if w == uid {
			return
		}
	}
	g.waiting[fullName] = append(g.waiting[fullName], uid)
}

func (g *fullNameGate) withdraw(fullName string, uid types.UID) {
	queue := g.waiting[fullName]
	for i, w := range queue {
		if w == uid {
			queue = append(queue[:i:i], queue[i+1:]...)
			break
		}
	}
	if len(queue) == 0 {
		delete(g.waiting, fullName)
	} else {
		g.waiting[fullName] = queue
	}
}
