package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/berth-agent/berth/internal/kubeclient"
	"github.com/berth-agent/berth/internal/nodestatus"
)

// The cluster check's thresholds: the Lease lasts 40 s (the kubelet's, and
// nodestatus's), after which the control plane marks the node NotReady;
// a client certificate with less than a day left is about to cut the node
// off if its renewal does not come through.
const (
	leaseFresh   = 40 * time.Second
	certMinLeft  = 24 * time.Hour
	nodeTimeout  = 5 * time.Second
	readyTimeout = 10 * time.Second
)

// errNotJoined is the daemon's 404 on /node: it runs without --kubeconfig.
var errNotJoined = errors.New("the daemon joins no cluster")

// daemonNode asks the daemon's socket for /node; an error when the socket
// does not answer (berth not running), errNotJoined for its 404.
func daemonNode(ctx context.Context, socket string) (*nodestatus.State, error) {
	if socket == "" {
		return nil, errors.New("no --socket")
	}
	ctx, cancel := context.WithTimeout(ctx, nodeTimeout)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://berth/node", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ask the daemon at %s: %w", socket, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, errNotJoined
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("the daemon at %s answered /node with %d: %s", socket, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	var s nodestatus.State
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&s); err != nil {
		return nil, fmt.Errorf("decode the daemon's /node: %w", err)
	}
	return &s, nil
}

// apiServerReady is the direct check when the daemon cannot be asked: the
// API server of kubeconfig answers /readyz with its credentials.
func apiServerReady(ctx context.Context, kubeconfig string) error {
	c, err := kubeclient.New(kubeconfig, "berth-doctor")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return c.Readyz(ctx)
}

// checkCluster: with --kubeconfig, berth's node is registered, its Lease
// renewed within the Lease's 40 s, its API server answering, and its
// client certificate (TLS bootstrap) valid for more than a day, as the
// running daemon reports at /node. When the daemon does not answer, the
// API server of the kubeconfig is asked /readyz directly. Pods never
// depend on any of it, but a node the cluster sees NotReady gets its
// scheduled pods evicted and its mirror pods stale.
func (e *env) checkCluster(ctx context.Context) Result {
	r := Result{Check: "cluster"}
	kubeconfig := e.opts.Kubeconfig
	if kubeconfig == "" {
		r.Status, r.Message = OK, "not joined: no --kubeconfig"
		return r
	}
	state, err := e.nodeState(ctx, e.opts.Socket)
	switch {
	case errors.Is(err, errNotJoined):
		r.Status = Warn
		r.Message = "--kubeconfig is set, but the running daemon joins no cluster: it was started without it"
		r.Fix = "restart berth with this configuration (systemctl restart berth)"
		return r
	case err != nil:
		if err := e.apiReady(ctx, kubeconfig); err != nil {
			r.Status = Fail
			r.Message = fmt.Sprintf("the daemon does not answer, and the API server of %s does not either: %v", kubeconfig, err)
			r.Fix = "check the kubeconfig's server, the network to it and the credentials; with --bootstrap-kubeconfig the kubeconfig appears after the first certificate"
			return r
		}
		r.Status, r.Message = OK, fmt.Sprintf("the API server of %s answers /readyz (the daemon was not asked: it does not answer)", kubeconfig)
		return r
	}
	return judgeNode(state, e.opts.Clock.Now())
}

// judgeNode turns the daemon's /node into the cluster line.
func judgeNode(s *nodestatus.State, now time.Time) Result {
	r := Result{Check: "cluster"}
	server := s.APIServer
	if server == "" {
		server = "the API server"
	}
	switch {
	case s.Error != "":
		since := ""
		if s.ErrorSince != nil {
			since = " for " + duration.HumanDuration(now.Sub(*s.ErrorSince))
		}
		r.Status = Fail
		r.Message = fmt.Sprintf("node %s: %s failing%s: %s (pods keep running)", s.NodeName, server, since, s.Error)
		r.Fix = "check that " + server + " is up and reachable from this machine, and that the node's credentials are accepted; berth retries on its own"
	case !s.Registered:
		r.Status = Warn
		r.Message = fmt.Sprintf("node %s is not registered with %s yet", s.NodeName, server)
		r.Fix = "wait a few seconds and run berth doctor again; journalctl -u berth says why if it stays so"
	case s.LastLeaseRenewal == nil || now.Sub(*s.LastLeaseRenewal) > leaseFresh:
		r.Status = Fail
		r.Message = fmt.Sprintf("node %s: Lease not renewed within %s: the cluster marks the node NotReady", s.NodeName, leaseFresh)
		r.Fix = "journalctl -u berth for the node's errors; check " + server
	case s.ClientCertificateExpiry != nil && !now.Before(*s.ClientCertificateExpiry):
		r.Status = Fail
		r.Message = fmt.Sprintf("node %s: client certificate expired %s", s.NodeName, s.ClientCertificateExpiry.Format(time.RFC3339))
		r.Fix = "approve the node's pending CSR (kubectl get csr), or remove the certificate and restart berth to bootstrap again"
	case s.ClientCertificateExpiry != nil && s.ClientCertificateExpiry.Sub(now) < certMinLeft:
		r.Status = Warn
		r.Message = fmt.Sprintf("node %s: client certificate expires in %s", s.NodeName, duration.HumanDuration(s.ClientCertificateExpiry.Sub(now)))
		r.Fix = "approve the node's pending CSR (kubectl get csr); with --rotate-certificates berth asks for the next one itself"
	default:
		r.Status = OK
		r.Message = fmt.Sprintf("node %s registered with %s, Lease renewed %s ago", s.NodeName, server, duration.HumanDuration(now.Sub(*s.LastLeaseRenewal)))
	}
	return r
}
