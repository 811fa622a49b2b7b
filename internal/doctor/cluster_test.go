package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/nodestatus"
)

func TestCheckCluster(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	healthy := func() *nodestatus.State {
		return &nodestatus.State{NodeName: "cp-node", Registered: true, APIServer: "https://10.0.0.1:6443",
			LastLeaseRenewal: at(-5 * time.Second), LastStatusUpdate: at(-5 * time.Second), ClientCertificateExpiry: at(30 * 24 * time.Hour)}
	}
	with := func(f func(*nodestatus.State)) *nodestatus.State { s := healthy(); f(s); return s }
	refused := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	tests := []struct {
		name       string
		kubeconfig string
		state      *nodestatus.State
		stateErr   error
		readyErr   error
		want       Status
		wantIn     string
	}{
		{"not joined", "", nil, nil, nil, OK, "not joined"},
		{"healthy", "/etc/berth/kubeconfig", healthy(), nil, nil, OK, "node cp-node registered with https://10.0.0.1:6443, Lease renewed 5s ago"},
		{"no certificate (no TLS bootstrap)", "/etc/berth/kubeconfig", with(func(s *nodestatus.State) { s.ClientCertificateExpiry = nil }), nil, nil, OK, "registered"},
		{"API server failing", "/etc/berth/kubeconfig", with(func(s *nodestatus.State) {
			s.Error, s.ErrorSince = "renew lease kube-node-lease/cp-node: "+refused.Error(), at(-2*time.Minute)
		}), nil, nil, Fail, "https://10.0.0.1:6443 failing for 2m: renew lease"},
		{"not registered yet", "/etc/berth/kubeconfig", with(func(s *nodestatus.State) { s.Registered, s.LastLeaseRenewal = false, nil }), nil, nil, Warn, "not registered"},
		{"stale lease", "/etc/berth/kubeconfig", with(func(s *nodestatus.State) { s.LastLeaseRenewal = at(-41 * time.Second) }), nil, nil, Fail, "not renewed within 40s"},
		{"certificate expires soon", "/etc/berth/kubeconfig", with(func(s *nodestatus.State) { s.ClientCertificateExpiry = at(3 * time.Hour) }), nil, nil, Warn, "expires in 3h"},
		{"certificate expired", "/etc/berth/kubeconfig", with(func(s *nodestatus.State) { s.ClientCertificateExpiry = at(-time.Second) }), nil, nil, Fail, "expired"},
		{"daemon without --kubeconfig", "/etc/berth/kubeconfig", nil, errNotJoined, nil, Warn, "joins no cluster"},
		{"daemon down, API server ready", "/etc/berth/kubeconfig", nil, errors.New("no socket"), nil, OK, "answers /readyz"},
		{"daemon down, API server down", "/etc/berth/kubeconfig", nil, errors.New("no socket"), refused, Fail, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := false
			e := &env{
				opts: Options{Kubeconfig: tt.kubeconfig, Socket: "/run/berth/berth.sock", Clock: clocktesting.NewFakeClock(now)},
				nodeState: func(context.Context, string) (*nodestatus.State, error) {
					asked = true
					return tt.state, tt.stateErr
				},
				apiReady: func(context.Context, string) error { return tt.readyErr },
			}
			r := e.checkCluster(context.Background())
			if r.Check != "cluster" {
				t.Errorf("check %q", r.Check)
			}
			checkResult(t, r, tt.want, tt.wantIn)
			if tt.kubeconfig == "" && asked {
				t.Error("asked the daemon without --kubeconfig")
			}
		})
	}
}

// TestDaemonNode reads /node as the daemon's socket serves it: the state,
// or errNotJoined for its 404.
func TestDaemonNode(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "berth.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	joined := true
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/node" || !joined {
			http.Error(w, "berth joins no cluster", http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(nodestatus.State{NodeName: "cp-node", Error: "boom"})
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	s, err := daemonNode(context.Background(), sock)
	if err != nil || s.NodeName != "cp-node" || s.Error != "boom" {
		t.Fatalf("daemonNode = %+v, %v", s, err)
	}
	joined = false
	if _, err := daemonNode(context.Background(), sock); !errors.Is(err, errNotJoined) {
		t.Errorf("daemonNode of a daemon without --kubeconfig: %v, want errNotJoined", err)
	}
	if _, err := daemonNode(context.Background(), filepath.Join(t.TempDir(), "none.sock")); err == nil || errors.Is(err, errNotJoined) {
		t.Errorf("daemonNode without a daemon: %v", err)
	}
}
