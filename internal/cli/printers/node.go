package printers

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// NodeState is the daemon's /node: the node controller's connection to
// the cluster's API server (docs/observability.md names the fields).
type NodeState struct {
	NodeName                string     `json:"nodeName"`
	NodeUID                 string     `json:"nodeUID,omitempty"`
	Registered              bool       `json:"registered"`
	APIServer               string     `json:"apiServer,omitempty"`
	LastStatusUpdate        *time.Time `json:"lastStatusUpdate,omitempty"`
	LastLeaseRenewal        *time.Time `json:"lastLeaseRenewal,omitempty"`
	Error                   string     `json:"error,omitempty"`
	ErrorSince              *time.Time `json:"errorSince,omitempty"`
	ClientCertificateExpiry *time.Time `json:"clientCertificateExpiry,omitempty"`
}

// NodeWarning is the line `berth pods` prints on stderr while the node's
// API server connection fails; "" while it is healthy.
func NodeWarning(s *NodeState, at time.Time) string {
	if s == nil || s.Error == "" {
		return ""
	}
	since := ""
	if s.ErrorSince != nil {
		since = " since " + duration.HumanDuration(at.Sub(*s.ErrorSince))
	}
	return fmt.Sprintf("Warning: node %s: API server %s unreachable%s: %s; pods keep running", s.NodeName, orNone(s.APIServer), since, s.Error)
}

// DescribeNode prints the node's state as a describe block.
func DescribeNode(w io.Writer, s *NodeState, at time.Time) {
	d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	d.line(0, "Name", s.NodeName)
	d.line(0, "UID", s.NodeUID)
	d.line(0, "API Server", s.APIServer)
	d.line(0, "Registered", titleBool(s.Registered))
	d.line(0, "Last Status Update", ago(s.LastStatusUpdate, at))
	d.line(0, "Last Lease Renewal", ago(s.LastLeaseRenewal, at))
	if s.ClientCertificateExpiry != nil {
		left := s.ClientCertificateExpiry.Sub(at)
		when := "in " + duration.HumanDuration(left)
		if left <= 0 {
			when = "expired " + duration.HumanDuration(-left) + " ago"
		}
		d.line(0, "Client Certificate Expires", fmt.Sprintf("%s (%s)", s.ClientCertificateExpiry.Format(time.RFC1123Z), when))
	}
	if s.Error == "" {
		d.line(0, "Status", "OK")
	} else {
		status := "Failing; pods keep running"
		if s.ErrorSince != nil {
			status = "Failing for " + duration.HumanDuration(at.Sub(*s.ErrorSince)) + "; pods keep running"
		}
		d.line(0, "Status", status)
		d.line(0, "Error", s.Error)
	}
	d.tw.Flush()
}

// ago is t as "12s ago" before at; "<none>" when unset.
func ago(t *time.Time, at time.Time) string {
	if t == nil {
		return ""
	}
	return duration.HumanDuration(at.Sub(*t)) + " ago"
}
