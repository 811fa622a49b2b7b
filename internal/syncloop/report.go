package syncloop

import "github.com/berth-agent/berth/internal/statusreport"

// statusReport is the agent's report, without its Time. It reads the
// status store, the merge store and health, each guarded by its own lock,
// so the reporter's goroutine may call it.
func (a *Loop) statusReport() statusreport.Report {
	rep := statusreport.Report{
		Node:             a.cfg.NodeName,
		BerthVersion:     a.cfg.Version,
		Ready:            a.health.Ready() == nil,
		ManifestVersions: a.store.Versions(),
		Pods:             []statusreport.PodReport{},
	}
	for _, p := range a.status.List() {
		rep.Pods = append(rep.Pods, statusreport.PodOf(p))
	}
	for _, pr := range a.store.Problems() {
		rep.Problems = append(rep.Problems, statusreport.ProblemOf(pr))
	}
	return rep
}
