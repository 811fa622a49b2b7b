package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// PrintText writes one aligned line per result, STATUS CHECK MESSAGE, with
// the fix indented on the line below each WARN and FAIL, and a last line
// with the worst status.
func PrintText(w io.Writer, results []Result) error {
	width := 0
	for _, r := range results {
		width = max(width, len(r.Check))
	}
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", r.Status, width, r.Check, oneLine(r.Message))
		if r.Status != OK && r.Fix != "" {
			fmt.Fprintf(&b, "%-4s  %-*s  fix: %s\n", "", width, "", oneLine(r.Fix))
		}
	}
	fmt.Fprintf(&b, "%s\n", summary(results))
	_, err := io.WriteString(w, b.String())
	return err
}

// oneLine keeps a message that quotes a runtime's error on its line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// summary is the closing line: how many checks came out how.
func summary(results []Result) string {
	n := map[Status]int{}
	for _, r := range results {
		n[r.Status]++
	}
	return fmt.Sprintf("%s: %d OK, %d WARN, %d FAIL", WorstStatus(results), n[OK], n[Warn], n[Fail])
}

// Report is the JSON form of a run: the worst status and every result.
type Report struct {
	Status Status   `json:"status"`
	Checks []Result `json:"checks"`
}

// PrintJSON writes the results as one indented Report.
func PrintJSON(w io.Writer, results []Result) error {
	if results == nil {
		results = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(Report{Status: WorstStatus(results), Checks: results})
}
