package nodestatus

import (
	"maps"
	"runtime"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The labels the kubelet sets on its Node and keeps on an existing one.
const (
	LabelHostname = "kubernetes.io/hostname"
	LabelOS       = "kubernetes.io/os"
	LabelArch     = "kubernetes.io/arch"
)

// Snapshot is what the agent measures for the node's conditions.
type Snapshot struct {
	// Ready is berth being ready (every source delivered, every pod
	// handed over) and the runtime answering; NotReadyMessage says why
	// not.
	Ready           bool
	NotReadyMessage string
	// Pressure is filled in by the controller (Config.Pressure).
	Pressure Pressure
}

// defaultLabels are the labels the kubelet derives itself; on an existing
// Node it puts them back when they differ.
func (c *Controller) defaultLabels() map[string]string {
	return map[string]string{
		LabelHostname: c.cfg.Hostname,
		LabelOS:       runtime.GOOS,
		LabelArch:     runtime.GOARCH,
	}
}

// initialNode is the Node as berth registers it: the kubelet's initialNode
// for a node without a cloud provider.
func (c *Controller) initialNode() *v1.Node {
	labels := maps.Clone(c.cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, c.defaultLabels())
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: c.cfg.NodeName, Labels: labels},
		Spec:       v1.NodeSpec{Taints: slices.Clone(c.cfg.Taints)},
	}
}

// reconcileLabels puts the default labels back on an existing Node, as
// the kubelet's updateDefaultLabels does; the others (--node-labels, the
// config file's) are only set at registration, so a label an administrator
// changed since stays changed. It says whether node changed.
func (c *Controller) reconcileLabels(node *v1.Node) bool {
	changed := false
	for k, v := range c.defaultLabels() {
		if node.Labels[k] == v {
			continue
		}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[k] = v
		changed = true
	}
	return changed
}

// setStatus writes the status berth reports into node at now: addresses,
// capacity, nodeInfo, daemon endpoints and the conditions, each
// condition's heartbeat now and its transition time kept unless its status
// changed (the kubelet's setters).
func (c *Controller) setStatus(node *v1.Node, snap Snapshot, now time.Time) {
	st := &node.Status
	st.Addresses = nil
	if c.cfg.NodeIP != "" {
		st.Addresses = append(st.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: c.cfg.NodeIP})
	}
	st.Addresses = append(st.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: c.cfg.Hostname})
	capacity := c.cfg.Capacity.DeepCopy()
	if capacity == nil {
		capacity = v1.ResourceList{}
	}
	capacity[v1.ResourcePods] = *resource.NewQuantity(int64(c.cfg.MaxPods), resource.DecimalSI)
	st.Capacity = capacity
	// berth reserves nothing for the system (no --kube-reserved): what
	// the machine has is what pods may have.
	st.Allocatable = capacity.DeepCopy()
	st.NodeInfo = c.cfg.NodeInfo
	st.NodeInfo.OperatingSystem, st.NodeInfo.Architecture = runtime.GOOS, runtime.GOARCH
	st.NodeInfo.KubeletVersion = c.cfg.KubeletVersion
	// berth serves no kubelet API (logs, exec, port-forward): port 0 says
	// so, and the API server's calls fail at once instead of reaching
	// something else on 10250.
	st.DaemonEndpoints = v1.NodeDaemonEndpoints{}
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "berth is ready"}
	if !snap.Ready {
		ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, "KubeletNotReady", snap.NotReadyMessage
	}
	p := snap.Pressure
	conds := []v1.NodeCondition{
		pressureCondition(v1.NodeMemoryPressure, p.Memory, "KubeletHasInsufficientMemory", "KubeletHasSufficientMemory", "memory"),
		pressureCondition(v1.NodeDiskPressure, p.Disk, "KubeletHasDiskPressure", "KubeletHasNoDiskPressure", "disk"),
		pressureCondition(v1.NodePIDPressure, p.PID, "KubeletHasInsufficientPID", "KubeletHasSufficientPID", "PID"),
		ready,
	}
	for _, nc := range conds {
		nc.LastHeartbeatTime = metav1.NewTime(now)
		nc.LastTransitionTime = metav1.NewTime(now)
		if old := findCondition(st.Conditions, nc.Type); old != nil {
			if old.Status == nc.Status {
				nc.LastTransitionTime = old.LastTransitionTime
			}
			*old = nc
			continue
		}
		st.Conditions = append(st.Conditions, nc)
	}
}

// pressureCondition is one of the kubelet's pressure conditions; msg is
// set when under pressure, else the kubelet's "has sufficient" text.
func pressureCondition(t v1.NodeConditionType, msg, reasonTrue, reasonFalse, what string) v1.NodeCondition {
	if msg != "" {
		return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: reasonTrue, Message: msg}
	}
	return v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: reasonFalse, Message: "berth has sufficient " + what + " available"}
}

func findCondition(conds []v1.NodeCondition, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// statusChanged is the kubelet's nodeStatusHasChanged: the statuses
// differ in anything but the conditions' heartbeat times.
func statusChanged(old, updated *v1.NodeStatus) bool {
	if len(old.Conditions) != len(updated.Conditions) {
		return true
	}
	strip := func(st *v1.NodeStatus) *v1.NodeStatus {
		cp := st.DeepCopy()
		for i := range cp.Conditions {
			cp.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		slices.SortFunc(cp.Conditions, func(a, b v1.NodeCondition) int {
			switch {
			case a.Type < b.Type:
				return -1
			case a.Type > b.Type:
				return 1
			}
			return 0
		})
		return cp
	}
	return !equality.Semantic.DeepEqual(strip(old), strip(updated))
}
