package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// Target is what the project aims for on one figure (docs/architecture.md,
// Performance targets). It is reported, never asserted: the machines are
// shared.
type Target struct {
	Text  string  `json:"text"`
	Limit float64 `json:"limit"`
	// AtMost makes Limit itself acceptable (0 restarts), instead of
	// strictly below it (under 400 ms).
	AtMost bool `json:"at_most,omitempty"`
}

// met tells whether a median meets the target.
func (t *Target) met(v float64) bool {
	if t.AtMost {
		return v <= t.Limit
	}
	return v < t.Limit
}

// Row is one figure of the table: its samples and their spread, or why it
// could not be measured for this agent.
type Row struct {
	Name    string    `json:"name"`
	Unit    string    `json:"unit"`
	Summary Summary   `json:"summary"`
	Samples []float64 `json:"samples,omitempty"`
	Target  *Target   `json:"target,omitempty"`
	Met     *bool     `json:"met,omitempty"`
	Kubelet string    `json:"kubelet,omitempty"`
	NA      string    `json:"na,omitempty"`
}

// Results is everything one bench run found, as printed and as written to
// results.json.
type Results struct {
	Agent    string    `json:"agent"`
	Runtime  string    `json:"runtime"` // the containerd measured on, as it reports its version
	BerthAPI bool      `json:"berth_api"`
	Quick    bool      `json:"quick"`
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	Rows     []Row     `json:"rows"`
	Notes    []string  `json:"notes,omitempty"`
	Failures []string  `json:"failures,omitempty"`
	// Compared is the compared agent's own results of the same run
	// (-compare), whose medians the kubelet column shows.
	Compared *Results `json:"compared,omitempty"`
}

// add records a figure from its samples; target and kubelet may be empty.
func (r *Results) add(name, unit string, samples []float64, target *Target, kubelet string) {
	row := Row{Name: name, Unit: unit, Samples: samples, Summary: summarize(samples), Target: target, Kubelet: kubelet}
	if target != nil && len(samples) > 0 {
		met := target.met(row.Summary.Median)
		row.Met = &met
	}
	r.Rows = append(r.Rows, row)
}

// na records a figure that does not apply to the agent measured, with why.
func (r *Results) na(name, unit, why string, target *Target, kubelet string) {
	r.Rows = append(r.Rows, Row{Name: name, Unit: unit, NA: why, Target: target, Kubelet: kubelet})
}

// fail records that a figure could not be measured.
func (r *Results) fail(figure string, err error) {
	r.Failures = append(r.Failures, fmt.Sprintf("%s: %v", figure, err))
}

// Failed reports whether any figure could not be measured, of the agent
// or of the compared one.
func (r *Results) Failed() bool {
	return len(r.Failures) > 0 || r.Compared != nil && r.Compared.Failed()
}

// note adds a line printed under the table (breakdowns, caveats).
func (r *Results) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Print writes the aligned table and the notes.
func (r *Results) Print(w io.Writer) error {
	if r.Runtime != "" {
		fmt.Fprintf(w, "runtime: containerd %s\n", r.Runtime)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tunit\tn\tmin\tmedian\tp95\tmax\tmean\ttarget\tmet\tkubelet\t")
	for _, row := range r.Rows {
		target, met := "", ""
		if row.Target != nil {
			target = row.Target.Text
		}
		if row.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*row.Met]
		}
		if row.NA != "" {
			fmt.Fprintf(tw, "%s\t%s\t-\tN/A\t\t\t\t\t%s\t\t%s\t\n", row.Name, row.Unit, target, row.Kubelet)
			continue
		}
		s := row.Summary
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", row.Name, row.Unit, s.N,
			num(s.Min), num(s.Median), num(s.P95), num(s.Max), num(s.Mean), target, met, row.Kubelet)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("print table: %w", err)
	}
	notes := r.Notes
	for _, row := range r.Rows {
		if row.NA != "" {
			notes = append(notes, fmt.Sprintf("%s: N/A: %s", row.Name, row.NA))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
	for _, f := range r.Failures {
		fmt.Fprintln(w, "FAILED "+f)
	}
	if c := r.Compared; c != nil {
		for _, n := range c.Notes {
			fmt.Fprintln(w, "- compared agent: "+n)
		}
		for _, f := range c.Failures {
			fmt.Fprintln(w, "FAILED compared agent: "+f)
		}
	}
	fmt.Fprintf(w, "\nagent: %s\nberth API: %v; bench took %s%s\n", r.Agent, r.BerthAPI, r.Duration,
		map[bool]string{true: " (-quick: fewer runs, shorter windows)", false: ""}[r.Quick])
	if r.Compared != nil {
		fmt.Fprintf(w, "compared agent (kubelet column, measured in this run): %s\n", r.Compared.Agent)
	}
	return nil
}

// WriteJSON writes the results to path.
func (r *Results) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// num formats a figure with the precision its size deserves, so the table
// stays narrow: whole numbers as such, small ones with more decimals.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e9:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
	}
}
