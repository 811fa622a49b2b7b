package podresources

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's CPU and OOM constants (pkg/kubelet/cm and qos).
const (
	minShares        = 2
	maxShares        = 262144
	sharesPerCPU     = 1024
	milliCPUPerCPU   = 1000
	quotaPeriod      = 100000 // microseconds, the CFS default
	minQuotaPeriod   = 1000
	guaranteedOOMAdj = -997
	besteffortOOMAdj = 1000
)

// NodeFacts are the machine's figures the config translation needs.
type NodeFacts struct {
	// Allocatable is what a container without limits may use: the CPUs,
	// memory and ephemeral storage of the machine. It stands in for unset
	// limits in the downward API, as the kubelet's node allocatable does.
	Allocatable v1.ResourceList
	// MinOOMScoreAdj is berth's own oom_score_adj. A container's cannot be
	// lower: where the runtime lacks CAP_SYS_RESOURCE (restrict_oom_score_adj)
	// a lower value fails every start.
	MinOOMScoreAdj int64
}

// ProbeMachine reads the CPU count, total memory, the size of the file
// system holding rootDir, and this process's oom_score_adj.
func ProbeMachine(rootDir string) (NodeFacts, error) {
	mem, err := memTotal()
	if err != nil {
		return NodeFacts{}, err
	}
	alloc := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}
	var st unix.Statfs_t
	if rootDir == "" {
		rootDir = "/"
	}
	if err := unix.Statfs(rootDir, &st); err == nil {
		// Bsize is int64 on 64-bit Linux and int32 on 32-bit ARM: widen it
		// before multiplying, or a 32-bit build does not compile.
		alloc[v1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*int64(st.Bsize), resource.BinarySI)
	}
	adj := int64(0)
	if b, err := os.ReadFile("/proc/self/oom_score_adj"); err == nil {
		if v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil {
			adj = v
		}
	}
	return NodeFacts{Allocatable: alloc, MinOOMScoreAdj: adj}, nil
}

// memTotal is MemTotal from /proc/meminfo, in bytes.
func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("read machine memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read machine memory: %w", err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("read machine memory: no MemTotal in /proc/meminfo")
}

// milliCPUToShares is the kubelet's conversion of a CPU request to cgroup
// shares: 1024 per CPU, at least 2.
func milliCPUToShares(milli int64) int64 {
	if milli == 0 {
		return minShares
	}
	shares := milli * sharesPerCPU / milliCPUPerCPU
	return min(max(shares, minShares), maxShares)
}

// milliCPUToQuota is the kubelet's conversion of a CPU limit to a CFS quota
// over quotaPeriod, at least 1 ms.
func milliCPUToQuota(milli int64) int64 {
	if milli == 0 {
		return 0
	}
	return max(milli*quotaPeriod/milliCPUPerCPU, minQuotaPeriod)
}

// Linux turns requests and limits into cgroup settings the way the
// kubelet does: shares from the CPU request (the limit when only that is
// set), quota from the CPU limit, the memory limit, and hugepage limits.
func Linux(r v1.ResourceRequirements) *runtimeapi.LinuxContainerResources {
	cpuReq, cpuLim := r.Requests.Cpu(), r.Limits.Cpu()
	lr := &runtimeapi.LinuxContainerResources{}
	if cpuReq.IsZero() && !cpuLim.IsZero() {
		lr.CpuShares = milliCPUToShares(cpuLim.MilliValue())
	} else {
		lr.CpuShares = milliCPUToShares(cpuReq.MilliValue())
	}
	if !cpuLim.IsZero() {
		lr.CpuPeriod = quotaPeriod
		lr.CpuQuota = milliCPUToQuota(cpuLim.MilliValue())
	}
	if mem := r.Limits.Memory(); !mem.IsZero() {
		lr.MemoryLimitInBytes = mem.Value()
	}
	for name, q := range r.Limits {
		size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
		if !ok {
			continue
		}
		pageSize, err := resource.ParseQuantity(size)
		if err != nil {
			continue
		}
		lr.HugepageLimits = append(lr.HugepageLimits, &runtimeapi.HugepageLimit{
			PageSize: hugePageSizeString(pageSize.Value()),
			Limit:    uint64(q.Value()),
		})
	}
	// Map iteration order must not leak into the config.
	sortHugepages(lr.HugepageLimits)
	return lr
}

// hugePageSizeString is the cgroup's spelling of a page size: 2MB, 1GB.
func hugePageSizeString(bytes int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	i := 0
	for bytes >= 1024 && bytes%1024 == 0 && i < len(units)-1 {
		bytes /= 1024
		i++
	}
	return strconv.FormatInt(bytes, 10) + units[i]
}

// sortHugepages orders hugepage limits by page size string.
func sortHugepages(h []*runtimeapi.HugepageLimit) {
	slices.SortFunc(h, func(a, b *runtimeapi.HugepageLimit) int { return strings.Compare(a.PageSize, b.PageSize) })
}

// OOMScoreAdj is the kubelet's QoS-based oom_score_adj: Guaranteed pods are
// protected, BestEffort go first, Burstable ones in between by their memory
// request. It never goes below berth's own (see NodeFacts.MinOOMScoreAdj).
func OOMScoreAdj(pod *v1.Pod, c *v1.Container, facts NodeFacts) int64 {
	var adj int64
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		adj = guaranteedOOMAdj
	case v1.PodQOSBestEffort:
		adj = besteffortOOMAdj
	default:
		adj = besteffortOOMAdj
		capacity := facts.Allocatable.Memory().Value()
		if capacity > 0 {
			adj = 1000 - (1000*c.Resources.Requests.Memory().Value())/capacity
		}
		// Burstable stays above Guaranteed and below BestEffort.
		adj = min(max(adj, 1000+guaranteedOOMAdj), besteffortOOMAdj-1)
	}
	return max(adj, facts.MinOOMScoreAdj)
}

// QOSClass is the pod's QoS class from CPU and memory alone: Guaranteed when
// every container limits both with requests equal to the limits (an unset
// request defaults to the limit), BestEffort when no container requests or
// limits either, Burstable otherwise.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	anySet, guaranteed := false, true
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				lim, hasLim := c.Resources.Limits[name]
				req, hasReq := c.Resources.Requests[name]
				if (hasLim && !lim.IsZero()) || (hasReq && !req.IsZero()) {
					anySet = true
				}
				if !hasLim || (hasReq && req.Cmp(lim) != 0) {
					guaranteed = false
				}
			}
		}
	}
	switch {
	case !anySet:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// PodRequirements sums what the pod's containers ask for, the way the
// scheduler sizes a pod: the larger of the app containers' sum and the
// largest init container, plus overhead. A limit only exists for the pod
// when every app container sets it; one unlimited container makes the pod
// unlimited. It sizes the sandbox's cgroup.
func PodRequirements(pod *v1.Pod) v1.ResourceRequirements {
	sum := func(get func(v1.ResourceRequirements) v1.ResourceList, needAll bool) v1.ResourceList {
		out := v1.ResourceList{}
		count := map[v1.ResourceName]int{}
		for _, c := range pod.Spec.Containers {
			for n, q := range get(c.Resources) {
				v := out[n]
				v.Add(q)
				out[n] = v
				count[n]++
			}
		}
		if needAll {
			for n := range out {
				if count[n] < len(pod.Spec.Containers) {
					delete(out, n)
				}
			}
		}
		for _, c := range pod.Spec.InitContainers {
			for n, q := range get(c.Resources) {
				if v, ok := out[n]; (ok || !needAll) && q.Cmp(v) > 0 {
					out[n] = q.DeepCopy()
				}
			}
		}
		for n, q := range pod.Spec.Overhead {
			if v, ok := out[n]; ok || !needAll {
				v.Add(q)
				out[n] = v
			}
		}
		return out
	}
	return v1.ResourceRequirements{
		Requests: sum(func(r v1.ResourceRequirements) v1.ResourceList { return r.Requests }, false),
		Limits:   sum(func(r v1.ResourceRequirements) v1.ResourceList { return r.Limits }, true),
	}
}
