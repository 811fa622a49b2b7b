//go:build e2e

package systemdbed

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestJournalPriorities: under systemd berth writes native journal
// entries, so `journalctl -p warning` shows a broken manifest's warning
// and not the info lines, the structured keys are fields of their own
// (SOURCE=file), and no message carries a second timestamp.
func TestJournalPriorities(t *testing.T) {
	needBed(t)
	ensureInstalled(t)
	since := "@" + sh(t, "date +%s")
	sh(t, "systemctl restart berth")
	writeManifest(t, "broken", "apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\nspec: {containers: []}\n")
	t.Cleanup(func() { removeManifest(t, "broken") })
	waitStatus(t, "2 pods running, 0 pending, 0 failed, 1 manifest problems")

	journal := func(args string) string {
		return sh(t, "journalctl -u berth --no-pager --since "+since+" "+args)
	}
	waitFor(t, "the broken manifest's warning at priority warning", 30*time.Second, func() (bool, string) {
		out := journal("-p warning -o cat")
		return strings.Contains(out, "manifest rejected"), out
	})
	if out := journal("-p warning -o cat"); strings.Contains(out, "berth is ready") {
		t.Errorf("an info line passes -p warning:\n%s", out)
	}
	if out := journal("-o cat"); !strings.Contains(out, "berth is ready") {
		t.Errorf("no info line without -p:\n%s", out)
	}

	ownTime := regexp.MustCompile(`(^|\s)time=`)
	var rejected map[string]any
	for _, line := range strings.Split(journal("-o json"), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("journalctl -o json: %v: %q", err, line)
		}
		msg, _ := entry["MESSAGE"].(string)
		if ownTime.MatchString(msg) {
			t.Errorf("a message with a timestamp of its own: %q", msg)
		}
		if strings.HasPrefix(msg, "manifest rejected") && rejected == nil {
			rejected = entry
		}
	}
	switch {
	case rejected == nil:
		t.Error("no manifest rejected entry in journalctl -o json")
	case rejected["PRIORITY"] != "4":
		t.Errorf("manifest rejected has PRIORITY %v, want 4 (warning): %v", rejected["PRIORITY"], rejected)
	case rejected["SOURCE"] != "file" && rejected["POD"] == nil:
		t.Errorf("manifest rejected has no SOURCE or POD field: %v", rejected)
	}
}
