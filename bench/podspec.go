package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Labels every CRI-speaking static-pod agent (berth, the kubelet) puts on
// what it creates: the bench finds its pods by them, never by anything
// berth-specific, so another agent is measured the same way.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// containerName is the one container of every bench pod.
const containerName = "main"

// benchImage is the busybox the test bed imports; agents normalize it to
// docker.io/library/busybox:1.36.
const benchImage = "busybox:1.36"

// sleeper exits at once on TERM: busybox sh runs a trap only between
// commands, but a trapped signal interrupts `wait`, so waiting on a
// background sleep makes the stop as quick as the agent's own work. One
// long sleep instead of a loop of short ones keeps 110 idle pods from
// forking every second, which would be noise in the idle figures.
const sleeper = "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"

// podSpec describes one bench pod.
type podSpec struct {
	Name        string // manifest metadata.name (the runtime pod name adds "-" + node)
	HostNetwork bool
	Gen         int  // the env value an edit changes
	Probe       bool // an exec readiness probe (`true`) every 10 s
	// Critical gives the pod priorityClassName system-node-critical, as a
	// node's network proxy or etcd has.
	Critical bool
}

// pod builds the manifest object of s.
func (s podSpec) pod() *corev1.Pod {
	grace := int64(10)
	var probe *corev1.Probe
	if s.Probe {
		probe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 10,
		}
	}
	priorityClass := ""
	if s.Critical {
		priorityClass = "system-node-critical"
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name},
		Spec: corev1.PodSpec{
			HostNetwork:                   s.HostNetwork,
			PriorityClassName:             priorityClass,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           benchImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", sleeper},
				Env:             []corev1.EnvVar{{Name: "BENCH_GEN", Value: strconv.Itoa(s.Gen)}},
				ReadinessProbe:  probe,
			}},
		},
	}
}

// manifestFile is where s's manifest lives in dir.
func manifestFile(dir, name string) string {
	return filepath.Join(dir, name+".yaml")
}

// dropManifests writes every manifest to a dotfile first (which agents
// ignore), then renames them all into place, so an agent never sees a half
// written file and the measured moment is the rename alone. It returns the
// time taken just before the first rename.
func dropManifests(dir string, specs ...podSpec) (time.Time, error) {
	tmps := make([]string, len(specs))
	for i, s := range specs {
		data, err := yaml.Marshal(s.pod())
		if err != nil {
			return time.Time{}, fmt.Errorf("encode manifest %s: %w", s.Name, err)
		}
		tmps[i] = filepath.Join(dir, "."+s.Name+".tmp")
		if err := os.WriteFile(tmps[i], data, 0o644); err != nil {
			return time.Time{}, fmt.Errorf("write manifest %s: %w", s.Name, err)
		}
	}
	t0 := time.Now()
	for i, s := range specs {
		if err := os.Rename(tmps[i], manifestFile(dir, s.Name)); err != nil {
			return time.Time{}, fmt.Errorf("rename manifest %s into place: %w", s.Name, err)
		}
	}
	return t0, nil
}

// removeManifests deletes the named manifests and returns the time taken
// just before the first removal.
func removeManifests(dir string, names ...string) (time.Time, error) {
	t0 := time.Now()
	for _, n := range names {
		if err := os.Remove(manifestFile(dir, n)); err != nil {
			return time.Time{}, fmt.Errorf("remove manifest %s: %w", n, err)
		}
	}
	return t0, nil
}

// specs makes n pod specs named prefix-0 .. prefix-(n-1).
func specs(prefix string, n int, hostNetwork bool) []podSpec {
	out := make([]podSpec, n)
	for i := range out {
		out[i] = podSpec{Name: fmt.Sprintf("%s-%d", prefix, i), HostNetwork: hostNetwork}
	}
	return out
}

// withCritical makes n pod specs of which the last (in the order they are
// dropped, and in file-name order) is critical: the worst place for it.
func withCritical(prefix string, n int) []podSpec {
	ss := specs(prefix, n-1, false)
	return append(ss, podSpec{Name: prefix + "-crit", Critical: true})
}

// names lists the manifest names of specs.
func names(ss []podSpec) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

// podList is the HTTP source's document for specs.
func podList(ss []podSpec) *corev1.PodList {
	l := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	for _, s := range ss {
		l.Items = append(l.Items, *s.pod())
	}
	return l
}
