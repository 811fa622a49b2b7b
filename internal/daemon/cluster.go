package daemon

import (
	"fmt"

	"github.com/berth-agent/berth/internal/config"
	"github.com/berth-agent/berth/internal/kubeclient"
	"github.com/berth-agent/berth/internal/mirror"
	"github.com/berth-agent/berth/internal/nodestatus"
	"github.com/berth-agent/berth/internal/podresources"
)

// clusterConfigs builds the node controller's and the mirrorer's
// configurations over one API client when --kubeconfig is set, and
// nothing at all otherwise: a berth that joins no cluster builds no
// client, opens no connection and starts no goroutine for it.
// runtimeVersion is the CRI runtime's as NAME://VERSION, for nodeInfo.
func clusterConfigs(s config.Settings, nodeName, hostIP, version, runtimeVersion string) (*nodestatus.Config, *mirror.Config, error) {
	if s.Kubeconfig == "" {
		return nil, nil, nil
	}
	client, err := kubeclient.New(s.Kubeconfig, "berth/"+version)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	facts, err := podresources.ProbeMachine(s.RootDir)
	if err != nil {
		return nil, nil, fmt.Errorf("node capacity: %w", err)
	}
	nc := s.NodeConfig(nodeName, hostIP)
	nc.Nodes, nc.Leases = client.Nodes(), client.Leases(nodestatus.LeaseNamespace)
	nc.Capacity = facts.Allocatable
	nc.NodeInfo = nodestatus.SystemInfo(runtimeVersion)
	nc.KubeletVersion = nodestatus.KubeletVersion(version)
	rootDir := s.RootDir
	nc.Pressure = func() nodestatus.Pressure { return nodestatus.Measure(rootDir) }
	pods := func(namespace string) mirror.PodClient { return client.Pods(namespace) }
	return &nc, &mirror.Config{Pods: pods, Nodes: client.Nodes(), NodeName: nodeName}, nil
}
