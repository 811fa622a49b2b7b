package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/nodestatus"
)

func TestAPINode(t *testing.T) {
	since := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	failing := &nodestatus.State{NodeName: "cp-node", Registered: true, APIServer: "https://10.0.0.1:6443",
		Error: "renew lease kube-node-lease/cp-node: connection refused", ErrorSince: &since}
	for _, tc := range []struct {
		name     string
		state    func() *nodestatus.State
		overTCP  bool
		wantCode int
		wantBody string
	}{
		{"joined, on the socket", func() *nodestatus.State { return failing }, false, http.StatusOK, `"error": "renew lease kube-node-lease/cp-node: connection refused"`},
		{"joined, over TCP", func() *nodestatus.State { return failing }, true, http.StatusForbidden, "unix socket only"},
		{"not joined", nil, false, http.StatusNotFound, "without --kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newAPIBed(t, func(s *Server) { s.nodeState = tc.state })
			code, body := b.get(t, "/node", tc.overTCP)
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Fatalf("/node: %d %s, want %d with %q", code, body, tc.wantCode, tc.wantBody)
			}
			if tc.overTCP && strings.Contains(body, "10.0.0.1") {
				t.Errorf("/node over TCP names the API server: %s", body)
			}
			if code == http.StatusOK {
				var got nodestatus.State
				if err := json.Unmarshal([]byte(body), &got); err != nil || got.NodeName != "cp-node" || !got.ErrorSince.Equal(since) {
					t.Errorf("/node decodes to %+v (%v)", got, err)
				}
			}
		})
	}
}
