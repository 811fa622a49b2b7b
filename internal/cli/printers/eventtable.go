package printers

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
)

// LastSeen is when the event last happened: its lastTimestamp, else its
// eventTime, else its firstTimestamp, as kubectl events sorts them.
func LastSeen(e *v1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// EventTableOptions are the columns of an EventTable.
type EventTableOptions struct {
	// WithNamespace leads with NAMESPACE, for a list of every namespace.
	WithNamespace bool
	// NoHeaders leaves the header line out.
	NoHeaders bool
}

// EventTable prints events as kubectl events does: LAST SEEN (with the
// count and span of a repeated event), TYPE, REASON, OBJECT, MESSAGE, and
// NAMESPACE first when every namespace is listed. Its caller owns it; it
// is not safe for concurrent use.
type EventTable struct {
	o  EventTableOptions
	tw *tabwriter.Writer
	// headed is whether the header line is written (or left out).
	headed bool
}

// NewEventTable is a table written to w; nothing is written before the
// first row.
func NewEventTable(w io.Writer, o EventTableOptions) *EventTable {
	return &EventTable{o: o, tw: tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)}
}

// Row adds event e; its ages are as of at.
func (t *EventTable) Row(e *v1.Event, at time.Time) {
	if !t.headed && !t.o.NoHeaders {
		head := []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}
		if t.o.WithNamespace {
			head = append([]string{"NAMESPACE"}, head...)
		}
		fmt.Fprintln(t.tw, strings.Join(head, "\t"))
	}
	t.headed = true
	seen := since(LastSeen(e), at)
	if e.Count > 1 && !e.FirstTimestamp.IsZero() {
		seen = fmt.Sprintf("%s (x%d over %s)", seen, e.Count, since(e.FirstTimestamp.Time, at))
	}
	row := []string{seen, e.Type, e.Reason, strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name, strings.TrimSpace(e.Message)}
	if t.o.WithNamespace {
		row = append([]string{e.InvolvedObject.Namespace}, row...)
	}
	fmt.Fprintln(t.tw, strings.Join(row, "\t"))
}

// Flush writes the rows so far.
func (t *EventTable) Flush() {
	t.tw.Flush()
}
