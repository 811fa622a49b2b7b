package testbed

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestOwnerAlive(t *testing.T) {
	me, err := selfOwner()
	if err != nil {
		t.Fatalf("selfOwner: %v", err)
	}
	tests := []struct {
		name  string
		owner owner
		want  bool
	}{
		{name: "this process", owner: *me, want: true},
		{name: "recycled PID", owner: owner{PID: me.PID, StartTime: me.StartTime + 1}},
		{name: "no such process", owner: owner{PID: 1 << 30, StartTime: me.StartTime}},
	}
	for _, tc := range tests {
		if got := tc.owner.alive(); got != tc.want {
			t.Errorf("%s: alive = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReapOrphanLeavesOwnedBeds(t *testing.T) {
	me, err := selfOwner()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		owner *owner
	}{
		{name: "no owner: a `testbed up` bed", owner: nil},
		{name: "live owner", owner: me},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data, err := json.Marshal(bedState{Socket: filepath.Join(dir, socketName), Owner: tc.owner})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, stateFile), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := reapOrphan(dir); err != nil {
				t.Fatalf("reapOrphan: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, stateFile)); err != nil {
				t.Errorf("the bed was taken for an orphan: %v", err)
			}
		})
	}
	if err := reapOrphan(filepath.Join(t.TempDir(), "gone")); err != nil {
		t.Errorf("reapOrphan of a missing dir: %v", err)
	}
}
