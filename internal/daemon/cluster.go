package daemon

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/berth-agent/berth/internal/config"
	"github.com/berth-agent/berth/internal/kubeclient"
	"github.com/berth-agent/berth/internal/mirror"
	"github.com/berth-agent/berth/internal/nodecert"
	"github.com/berth-agent/berth/internal/nodestatus"
	"github.com/berth-agent/berth/internal/podresources"
)

// clusterConfigs builds the node controller's and the mirrorer's
// configurations over one API client when --kubeconfig is set, and
// nothing at all otherwise: a berth that joins no cluster builds no
// client, opens no connection and starts no goroutine for it.
// runtimeVersion is the CRI runtime's as NAME://VERSION, for nodeInfo.
//
// With --bootstrap-kubeconfig the client presents the certificate the
// returned manager holds, which its Run gets and renews: until the first
// is issued the node's calls fail and back off, and pods run regardless.
func clusterConfigs(s config.Settings, nodeName, hostIP, version, runtimeVersion string, log *slog.Logger) (*nodestatus.Config, *mirror.Config, *nodecert.Manager, error) {
	if s.Kubeconfig == "" {
		return nil, nil, nil, nil
	}
	userAgent := "berth/" + version
	var certs *nodecert.Manager
	var client *kubeclient.Client
	var err error
	if s.BootstrapKubeconfig != "" {
		certs, err = nodecert.New(nodecert.Config{
			Kubeconfig: s.Kubeconfig, BootstrapKubeconfig: s.BootstrapKubeconfig, PKIDir: filepath.Join(s.RootDir, "pki"),
			NodeName: nodeName, Rotate: s.RotateCertificates, UserAgent: userAgent, Logger: log.With("component", "nodecert"),
		})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--bootstrap-kubeconfig: %w", err)
		}
		rc := certs.RESTConfig()
		rc.UserAgent = userAgent
		client, err = kubeclient.NewForConfig(rc)
	} else {
		client, err = kubeclient.New(s.Kubeconfig, userAgent)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	facts, err := podresources.ProbeMachine(s.RootDir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("node capacity: %w", err)
	}
	nc := s.NodeConfig(nodeName, hostIP)
	nc.Nodes, nc.Leases = client.Nodes(), client.Leases(nodestatus.LeaseNamespace)
	nc.APIServer = client.Server()
	if certs != nil {
		nc.CertificateExpiry = certs.Expiry
	}
	nc.Capacity = facts.Allocatable
	nc.NodeInfo = nodestatus.SystemInfo(runtimeVersion)
	nc.KubeletVersion = nodestatus.KubeletVersion(version)
	rootDir := s.RootDir
	nc.Pressure = func() nodestatus.Pressure { return nodestatus.Measure(rootDir) }
	pods := func(namespace string) mirror.PodClient { return client.Pods(namespace) }
	return &nc, &mirror.Config{Pods: pods, Nodes: client.Nodes(), NodeName: nodeName}, certs, nil
}
