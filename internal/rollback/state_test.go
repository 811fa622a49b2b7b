package rollback

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
)

// validRollbackFile is a state file as berth writes it, for the tests to
// break one field at a time.
func validRollbackFile(t testing.TB) rollbackFile {
	t.Helper()
	res := podspec.Parse([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: app, image: busybox:1.36}]}"),
		podspec.Origin{Source: podspec.SourceFile, Path: "/m/web.yaml"}, podtest.Node)
	if len(res.Pods) != 1 {
		t.Fatalf("manifest: %v", res.Problems)
	}
	good := res.Pods[0]
	return rollbackFile{Version: rollbackStateVersion, NodeName: podtest.Node, Source: podspec.SourceFile, Origin: "/m/web.yaml",
		FullName: podspec.FullName(good), nameRecord: nameRecord{
			LastReady: good, ReadyAt: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC),
			RolledBack: &rollback{Bad: "0123456789abcdef0123456789abcdef", BadSource: podspec.SourceFile, BadOrigin: "/m/web.yaml",
				Good: good.UID, Reason: ReasonRolledBack, Message: "m"},
		}}
}

// byName turns rf into the layout-1 file an older berth wrote: no source
// or origin, keyed by full name alone.
func byName(rf *rollbackFile) {
	rf.Version, rf.Source, rf.Origin = rollbackStateVersionByName, "", ""
}

// TestDecodeRollbackState: a state file is used only when everything in
// it is what berth would have written on this node; a layout-1 file is
// attributed to its kept pod's manifest, and its rollback kept only when
// the failed version came from that manifest too.
func TestDecodeRollbackState(t *testing.T) {
	tests := []struct {
		name   string
		change func(rf *rollbackFile)
		raw    func(b []byte) []byte
		want   string // error substring, "" for valid
		// dropped: a valid layout-1 file whose rollback is left out.
		dropped bool
	}{
		{name: "valid", change: func(*rollbackFile) {}},
		{name: "another version", change: func(rf *rollbackFile) { rf.Version = 3 }, want: "version 3"},
		{name: "version 0", change: func(rf *rollbackFile) { rf.Version = 0 }, want: "version 0"},
		{name: "another source", change: func(rf *rollbackFile) { rf.Source = podspec.SourceHTTP }, want: `not http "/m/web.yaml"`},
		{name: "another origin", change: func(rf *rollbackFile) { rf.Origin = "/m/web2.yaml" }, want: `not file "/m/web2.yaml"`},
		{name: "no source or origin", change: func(rf *rollbackFile) { rf.Source, rf.Origin = "", "" }, want: "was read from"},
		{name: "rollback of another source's version", change: func(rf *rollbackFile) { rf.RolledBack.BadSource = podspec.SourceHTTP },
			want: "rollback of a version read from http"},
		{name: "rollback of another origin's version", change: func(rf *rollbackFile) { rf.RolledBack.BadOrigin = "/m/web-b.yaml" },
			want: "rollback of a version read from file \"/m/web-b.yaml\""},
		{name: "layout 1", change: byName},
		{name: "layout 1 without a rollback", change: func(rf *rollbackFile) { byName(rf); rf.RolledBack = nil }},
		{name: "layout 1 naming a source", change: func(rf *rollbackFile) { byName(rf); rf.Source = podspec.SourceFile }, want: "names a source"},
		{name: "layout 1 rollback of another source's version", change: func(rf *rollbackFile) {
			byName(rf)
			rf.RolledBack.BadSource, rf.RolledBack.BadOrigin = podspec.SourceHTTP, "https://fleet.example/pods.yaml"
		}, dropped: true},
		{name: "layout 1 rollback of another file's version", change: func(rf *rollbackFile) { byName(rf); rf.RolledBack.BadOrigin = "/m/web-b.yaml" },
			dropped: true},
		{name: "layout 1 rollback naming no source", change: func(rf *rollbackFile) { byName(rf); rf.RolledBack.BadSource, rf.RolledBack.BadOrigin = "", "" },
			dropped: true},
		{name: "layout 1 pod without its source", change: func(rf *rollbackFile) {
			byName(rf)
			delete(rf.LastReady.Annotations, podspec.AnnotationSource)
		}, want: "no known source"},
		{name: "layout 1 pod without its origin", change: func(rf *rollbackFile) {
			byName(rf)
			delete(rf.LastReady.Annotations, podspec.AnnotationOrigin)
		}, want: "berth.io/config.origin"},
		{name: "another node", change: func(rf *rollbackFile) { rf.NodeName = "node2" }, want: `node "node2"`},
		{name: "no last ready version", change: func(rf *rollbackFile) { rf.LastReady = nil }, want: "no last Ready version"},
		{name: "another full name", change: func(rf *rollbackFile) { rf.FullName = "db-node1_default" }, want: "not \"db-node1_default\""},
		{name: "uid not its hash", change: func(rf *rollbackFile) { rf.LastReady.UID = "forged" }, want: "does not match"},
		{name: "pod of another node", change: func(rf *rollbackFile) { rf.LastReady.Spec.NodeName = "node2" }, want: "not of node"},
		{name: "invalid pod", change: func(rf *rollbackFile) { rf.LastReady.Spec.Containers = nil }, want: "spec.containers"},
		{name: "unknown source", change: func(rf *rollbackFile) { rf.LastReady.Annotations[podspec.AnnotationSource] = "api" }, want: "no known source"},
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
			got, err := decodeRollbackState(b, podtest.Node)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("valid state refused: %v", err)
				}
				if got.Source != podspec.SourceFile || got.Origin != "/m/web.yaml" {
					t.Errorf("decoded as of %s %q, want the kept pod's file /m/web.yaml", got.Source, got.Origin)
				}
				if tt.dropped != (got.dropped != nil) || (tt.dropped && got.RolledBack != nil) {
					t.Errorf("rollback %+v, left out %+v; want it left out: %v", got.RolledBack, got.dropped, tt.dropped)
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
	s := &rollbackState{dir: dir, nodeName: podtest.Node, log: log}
	rf := validRollbackFile(t)
	k := rf.key()
	if err := s.save(k, &rf.nameRecord); err != nil {
		t.Fatal(err)
	}
	valid, err := os.ReadFile(filepath.Join(dir, rollbackStateName(k)))
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
	other := func(fn string) string {
		return rollbackStateName(Key{Source: k.Source, Origin: k.Origin, FullName: fn})
	}
	write(other("corrupt_default"), []byte("{"), 0o600)
	write(other("open_default"), valid, 0o666)
	write("misnamed.json", valid, 0o600)
	// The file of the same full name from another manifest.
	write(rollbackStateName(Key{Source: podspec.SourceHTTP, Origin: "https://fleet.example/pods.yaml", FullName: k.FullName}), valid, 0o600)
	// The valid record under its layout-1 name.
	write(rollbackStateNameByName(k.FullName), valid, 0o600)
	write("."+rollbackStateName(k)+".tmp-1", valid[:10], 0o600)
	if err := os.Symlink(filepath.Join(dir, rollbackStateName(k)), filepath.Join(dir, other("link_default"))); err != nil {
		t.Fatal(err)
	}

	got := (&rollbackState{dir: dir, nodeName: podtest.Node, log: log}).load()
	if len(got) != 1 || got[k] == nil || got[k].LastReady.UID != rf.LastReady.UID || got[k].RolledBack.Bad != rf.RolledBack.Bad {
		t.Fatalf("loaded %v, want only the valid record", got)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 {
		t.Errorf("files left after load: %v, want only the valid one", names)
	}
	if err := s.save(k, nil); err != nil {
		t.Fatal(err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("files left after the record was removed: %v", names)
	}
}

// FuzzDecodeRollbackState: whatever a state file holds, decoding returns
// an error or a record whose kept pod is a valid pod of this node, of the
// record's full name, source and origin, with a rollback only of a version
// of that same source and origin.
func FuzzDecodeRollbackState(f *testing.F) {
	rf := validRollbackFile(f)
	b, _ := json.Marshal(rf)
	f.Add(b)
	byName(&rf)
	b, _ = json.Marshal(rf)
	f.Add(b)
	rf.RolledBack.BadSource = podspec.SourceHTTP
	b, _ = json.Marshal(rf)
	f.Add(b)
	f.Add([]byte(`{"version":1,"nodeName":"node1","fullName":"x","lastReady":{}}`))
	f.Add([]byte(`{"version":2,"nodeName":"node1","source":"file","origin":"/m/x.yaml","fullName":"x","lastReady":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rf, err := decodeRollbackState(data, podtest.Node)
		if err != nil {
			return
		}
		if rf.LastReady == nil || rf.LastReady.Spec.NodeName != podtest.Node || podspec.FullName(rf.LastReady) != rf.FullName {
			t.Fatalf("accepted a state whose pod is not of this node and name: %+v", rf)
		}
		if k := KeyOf(rf.LastReady); k != rf.key() {
			t.Fatalf("accepted a record of %+v whose kept pod is of %+v", rf.key(), k)
		}
		if rb := rf.RolledBack; rb != nil && rb.Good != rf.LastReady.UID {
			t.Fatalf("accepted a rollback to %q, not the kept version %q", rb.Good, rf.LastReady.UID)
		}
		if rb := rf.RolledBack; rb != nil && (rb.BadSource != rf.Source || rb.BadOrigin != rf.Origin) {
			t.Fatalf("accepted a rollback of a version of %s %q to one of %s %q", rb.BadSource, rb.BadOrigin, rf.Source, rf.Origin)
		}
	})
}
