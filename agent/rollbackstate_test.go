package agent

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/manifest"
)

// validRollbackFile is a state file as berth writes it, for the tests to
// break one field at a time.
func validRollbackFile(t testing.TB) rollbackFile {
	t.Helper()
	res := manifest.Parse([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: app, image: busybox:1.36}]}"),
		manifest.Origin{Source: manifest.SourceFile, Path: "/m/web.yaml"}, testNode)
	if len(res.Pods) != 1 {
		t.Fatalf("manifest: %v", res.Problems)
	}
	good := res.Pods[0]
	return rollbackFile{Version: rollbackStateVersion, NodeName: testNode, FullName: manifest.FullName(good), nameRecord: nameRecord{
		LastReady: good, ReadyAt: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC),
		RolledBack: &rollback{Bad: "0123456789abcdef0123456789abcdef", BadSource: manifest.SourceFile, BadOrigin: "/m/web.yaml",
			Good: good.UID, Reason: ReasonRolledBack, Message: "m"},
	}}
}

// TestDecodeRollbackState: a state file is used only when everything in
// it is what berth would have written on this node.
func TestDecodeRollbackState(t *testing.T) {
	tests := []struct {
		name   string
		change func(rf *rollbackFile)
		raw    func(b []byte) []byte
		want   string // error substring, "" for valid
	}{
		{name: "valid", change: func(*rollbackFile) {}},
		{name: "another version", change: func(rf *rollbackFile) { rf.Version = 2 }, want: "version 2"},
		{name: "another node", change: func(rf *rollbackFile) { rf.NodeName = "node2" }, want: `node "node2"`},
		{name: "no last ready version", change: func(rf *rollbackFile) { rf.LastReady = nil }, want: "no last Ready version"},
		{name: "another full name", change: func(rf *rollbackFile) { rf.FullName = "db-node1_default" }, want: "not \"db-node1_default\""},
		{name: "uid not its hash", change: func(rf *rollbackFile) { rf.LastReady.UID = "forged" }, want: "does not match"},
		{name: "pod of another node", change: func(rf *rollbackFile) { rf.LastReady.Spec.NodeName = "node2" }, want: "not of node"},
		{name: "invalid pod", change: func(rf *rollbackFile) { rf.LastReady.Spec.Containers = nil }, want: "spec.containers"},
		{name: "unknown source", change: func(rf *rollbackFile) { rf.LastReady.Annotations[manifest.AnnotationSource] = "api" }, want: "no known source"},
		{name: "rollback to another version", change: func(rf *rollbackFile) { rf.RolledBack.Good = "other" }, want: "rollback to"},
		{name: "rollback of itself", change: func(rf *rollbackFile) { rf.RolledBack.Bad = rf.LastReady.UID }, want: "to itself"},
		{name: "unknown field", raw: func(b []byte) []byte { return []byte(strings.Replace(string(b), "{", `{"extra":1,`, 1)) }, want: "unknown field"},
		{name: "trailing data", raw: func(b []byte) []byte { return append(b, "{}"...) }, want: "trailing data"},
		{name: "truncated", raw: func(b []byte) []byte { return b[:len(b)/2] }, want: "decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rf := validRollbackFile(t)
			if tt.change != nil {
				tt.change(&rf)
			}
			b, err := json.Marshal(rf)
			if err != nil {
				t.Fatal(err)
			}
			if tt.raw != nil {
				b = tt.raw(b)
			}
			_, err = decodeRollbackState(b, testNode)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("valid state refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestRollbackStateFiles: records round-trip through their files; a file
// berth cannot trust (corrupt, writable by others, a symlink, misnamed)
// and a temporary file a kill left are ignored and removed; removing a
// record removes its file.
func TestRollbackStateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rollback")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &rollbackState{dir: dir, nodeName: testNode, log: log}
	rf := validRollbackFile(t)
	if err := s.save(rf.FullName, &rf.nameRecord); err != nil {
		t.Fatal(err)
	}
	valid, err := os.ReadFile(filepath.Join(dir, rollbackStateName(rf.FullName)))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(rollbackStateName("corrupt_default"), []byte("{"), 0o600)
	write(rollbackStateName("open_default"), valid, 0o666)
	write("misnamed.json", valid, 0o600)
	write("."+rollbackStateName(rf.FullName)+".tmp-1", valid[:10], 0o600)
	if err := os.Symlink(filepath.Join(dir, rollbackStateName(rf.FullName)), filepath.Join(dir, rollbackStateName("link_default"))); err != nil {
		t.Fatal(err)
	}

	got := (&rollbackState{dir: dir, nodeName: testNode, log: log}).load()
	if len(got) != 1 || got[rf.FullName] == nil || got[rf.FullName].LastReady.UID != rf.LastReady.UID || got[rf.FullName].RolledBack.Bad != rf.RolledBack.Bad {
		t.Fatalf("loaded %v, want only the valid record", got)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 {
		t.Errorf("files left after load: %v, want only the valid one", names)
	}
	if err := s.save(rf.FullName, nil); err != nil {
		t.Fatal(err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("files left after the record was removed: %v", names)
	}
}

// FuzzDecodeRollbackState: whatever a state file holds, decoding returns
// an error or a record whose kept pod is a valid pod of this node.
func FuzzDecodeRollbackState(f *testing.F) {
	b, _ := json.Marshal(validRollbackFile(f))
	f.Add(b)
	f.Add([]byte(`{"version":1,"nodeName":"node1","fullName":"x","lastReady":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rf, err := decodeRollbackState(data, testNode)
		if err != nil {
			return
		}
		if rf.LastReady == nil || rf.LastReady.Spec.NodeName != testNode || manifest.FullName(rf.LastReady) != rf.FullName {
			t.Fatalf("accepted a state whose pod is not of this node and name: %+v", rf)
		}
		if rb := rf.RolledBack; rb != nil && rb.Good != rf.LastReady.UID {
			t.Fatalf("accepted a rollback to %q, not the kept version %q", rb.Good, rf.LastReady.UID)
		}
	})
}
