package testbed

import (
	"path/filepath"
	"testing"
)

// TestProcessKill checks kill ends a process at once (it ignores nothing:
// SIGKILL) and that killing it again, or a nil process, is a no-op.
func TestProcessKill(t *testing.T) {
	// The unique argument is the marker that identifies the process.
	p, err := startProcess(filepath.Join(t.TempDir(), "sleep.log"), nil, "sleep", "3600.5")
	if err != nil {
		t.Fatal(err)
	}
	if !p.alive() {
		t.Fatal("the process is not alive after start")
	}
	if err := p.kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if p.alive() {
		t.Fatal("the process is alive after kill")
	}
	if err := p.kill(); err != nil {
		t.Errorf("kill of a dead process: %v", err)
	}
	var none *process
	if err := none.kill(); err != nil {
		t.Errorf("kill of a nil process: %v", err)
	}
}
