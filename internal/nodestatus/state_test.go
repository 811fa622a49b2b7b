package nodestatus

import (
	"context"
	"errors"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// TestStateFollowsTheRounds checks State through registration, an API
// server that goes down (the error and since when it began, kept over
// the failures in a row), and its return (no error, new renewals).
func TestStateFollowsTheRounds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	start := f.clock.Now()

	s := f.c.State()
	if s.Registered || s.Error != "" || s.LastLeaseRenewal != nil || s.NodeName != "edge-1" {
		t.Fatalf("before any round: %+v", s)
	}

	f.c.step(ctx)
	s = f.c.State()
	if !s.Registered || s.NodeUID != "node-uid-1" || s.Error != "" || s.ErrorSince != nil {
		t.Fatalf("after a good round: %+v", s)
	}
	if s.LastLeaseRenewal == nil || !s.LastLeaseRenewal.Equal(start) || s.LastStatusUpdate == nil || !s.LastStatusUpdate.Equal(start) {
		t.Errorf("after a good round: renewal %v, status %v, want %v", s.LastLeaseRenewal, s.LastStatusUpdate, start)
	}

	down := true
	f.client.PrependReactor("*", "*", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if down {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	f.clock.Step(10 * time.Second)
	failedAt := f.clock.Now()
	f.c.step(ctx)
	f.clock.Step(5 * time.Second)
	f.c.step(ctx)
	s = f.c.State()
	if s.Error == "" || s.ErrorSince == nil || !s.ErrorSince.Equal(failedAt) {
		t.Fatalf("while down: error %q since %v, want since %v", s.Error, s.ErrorSince, failedAt)
	}
	if !s.LastLeaseRenewal.Equal(start) {
		t.Errorf("while down: last renewal %v, want the last good one %v", s.LastLeaseRenewal, start)
	}

	down = false
	f.clock.Step(5 * time.Second)
	f.c.step(ctx)
	s = f.c.State()
	if s.Error != "" || s.ErrorSince != nil || !s.LastLeaseRenewal.Equal(f.clock.Now()) {
		t.Errorf("after recovery: %+v", s)
	}
}

func TestStateCarriesServerAndCertificate(t *testing.T) {
	expiry := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		expiry func() time.Time
		want   *time.Time
	}{
		{"no TLS bootstrap", nil, nil},
		{"not yet issued", func() time.Time { return time.Time{} }, nil},
		{"issued", func() time.Time { return expiry }, &expiry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			cfg := f.c.cfg
			cfg.APIServer, cfg.CertificateExpiry, cfg.Metrics = "https://192.0.2.1:6443", tc.expiry, nil
			c := New(cfg, func() Snapshot { return f.snap })
			s := c.State()
			if s.APIServer != "https://192.0.2.1:6443" {
				t.Errorf("APIServer = %q", s.APIServer)
			}
			if (s.ClientCertificateExpiry == nil) != (tc.want == nil) || (tc.want != nil && !s.ClientCertificateExpiry.Equal(*tc.want)) {
				t.Errorf("ClientCertificateExpiry = %v, want %v", s.ClientCertificateExpiry, tc.want)
			}
		})
	}
}
