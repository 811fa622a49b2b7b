package nodestatus

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// State is what the controller knows of its connection to the API server,
// as `GET /node` on the socket serves it. A State is immutable once
// published: the controller's goroutine builds a new one after each round
// and any goroutine reads the latest through Controller.State.
type State struct {
	// NodeName is the Node berth registers.
	NodeName string `json:"nodeName"`
	// NodeUID is the registered Node's; empty until registered.
	NodeUID types.UID `json:"nodeUID,omitempty"`
	// Registered is whether berth's Node exists in the API server as far
	// as the last round knows.
	Registered bool `json:"registered"`
	// APIServer is the API server's address, without credentials.
	APIServer string `json:"apiServer,omitempty"`
	// LastStatusUpdate is when the Node's status was last written.
	LastStatusUpdate *time.Time `json:"lastStatusUpdate,omitempty"`
	// LastLeaseRenewal is when the node's Lease was last renewed.
	LastLeaseRenewal *time.Time `json:"lastLeaseRenewal,omitempty"`
	// Error is the current failure; empty when the last round succeeded.
	Error string `json:"error,omitempty"`
	// ErrorSince is when the failures in a row began; nil when healthy.
	ErrorSince *time.Time `json:"errorSince,omitempty"`
	// ClientCertificateExpiry is when the client certificate of TLS
	// bootstrap expires; nil without --bootstrap-kubeconfig or before
	// the first is issued.
	ClientCertificateExpiry *time.Time `json:"clientCertificateExpiry,omitempty"`
}

// State returns the controller's latest state; safe from any goroutine.
func (c *Controller) State() *State {
	return c.state.Load()
}

// publish stores a new State from the goroutine's fields; only the
// goroutine in Run calls it.
func (c *Controller) publish() {
	s := &State{
		NodeName:   c.cfg.NodeName,
		NodeUID:    c.nodeUID,
		Registered: c.registered,
		APIServer:  c.cfg.APIServer,
		Error:      c.lastErr,
	}
	if !c.lastReport.IsZero() {
		s.LastStatusUpdate = timePtr(c.lastReport)
	}
	if !c.lastRenewal.IsZero() {
		s.LastLeaseRenewal = timePtr(c.lastRenewal)
	}
	if c.lastErr != "" {
		s.ErrorSince = timePtr(c.errSince)
	}
	if c.cfg.CertificateExpiry != nil {
		if t := c.cfg.CertificateExpiry(); !t.IsZero() {
			s.ClientCertificateExpiry = timePtr(t)
		}
	}
	c.state.Store(s)
}

func timePtr(t time.Time) *time.Time { return &t }
