package podsnapshot

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podrules"
	"github.com/berth-agent/berth/internal/podspec"
)

// placedPort is a host port claimed by a pod of a snapshot, with where.
type placedPort struct {
	port  podrules.HostPort
	pod   *v1.Pod
	where string // FILE:LINE of the claim
}

// hostPortConflicts warns of each host port a pod claims that an earlier
// pod of the snapshot claims too, as the scheduler's NodePorts filter
// would refuse to place them together. Static pods pass no scheduler:
// the kubelet admits both and the later one's port cannot be bound (a
// hostNetwork pod's process fails to listen, a portmap rule is shadowed
// by the first). berth runs both too, for which pod runs must not depend
// on the order of files, and says so on the later one.
func hostPortConflicts(source string, pods []placed) []podspec.Problem {
	var out []podspec.Problem
	var claimed []placedPort
	for _, pl := range pods {
		for _, h := range podrules.HostPorts(pl.pod) {
			line := pl.res.HostPortLine(pl.i, h.Field)
			where := pl.origin
			if line > 0 {
				where = fmt.Sprintf("%s:%d", where, line)
			}
			for _, c := range claimed {
				if c.pod != pl.pod && c.port.Clashes(h) {
					out = append(out, podspec.Problem{Source: source, Origin: pl.origin, Line: line, Field: pl.res.FieldPath(pl.i, h.Field),
						Reason: podspec.ReasonHostPortConflict, Name: pl.pod.Name, Namespace: pl.pod.Namespace,
						Message: fmt.Sprintf("hostPort %s clashes with %s of pod %q at %s: both pods run, but only one can hold the port", h, c.port, c.pod.Name, c.where)})
					break
				}
			}
			claimed = append(claimed, placedPort{port: h, pod: pl.pod, where: where})
		}
	}
	return out
}

// placed is a pod Assemble accepted, with its origin and the result (and
// index in it) that parsed it.
type placed struct {
	pod    *v1.Pod
	origin string
	res    podspec.Result
	i      int
}

// running keeps the accepted pods that resolving left in pods, as
// resolving left them (it may hand back another object of the same pod).
func running(accepted []placed, pods []*v1.Pod) []placed {
	byName := make(map[string]*v1.Pod, len(pods))
	for _, p := range pods {
		byName[podspec.FullName(p)] = p
	}
	out := accepted[:0]
	for _, pl := range accepted {
		if p, ok := byName[podspec.FullName(pl.pod)]; ok {
			pl.pod = p
			out = append(out, pl)
		}
	}
	return out
}
