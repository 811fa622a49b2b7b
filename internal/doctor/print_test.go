package doctor

import (
	"bytes"
	"encoding/json"
	"testing"
)

var sample = []Result{
	{Check: "runtime", Status: OK, Message: "containerd 1.6.20~ds1 (CRI v1) at unix:///run/containerd/containerd.sock is ready"},
	{Check: "runtime-events", Status: Warn, Message: "no events", Fix: "upgrade"},
	{Check: "cni", Status: Fail, Message: "no network configuration\nin /etc/cni/net.d", Fix: "put one there"},
	{Check: "clock", Status: OK, Message: "synchronised", Fix: "not shown for OK"},
}

// TestPrintText: aligned columns, one line per check (a message's own
// newlines folded), the fix below each non-OK line, and the summary.
func TestPrintText(t *testing.T) {
	var b bytes.Buffer
	if err := PrintText(&b, sample); err != nil {
		t.Fatal(err)
	}
	want := `OK    runtime         containerd 1.6.20~ds1 (CRI v1) at unix:///run/containerd/containerd.sock is ready
WARN  runtime-events  no events
                      fix: upgrade
FAIL  cni             no network configuration in /etc/cni/net.d
                      fix: put one there
OK    clock           synchronised
FAIL: 2 OK, 1 WARN, 1 FAIL
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestPrintJSON: the worst status and every result, fixes included.
func TestPrintJSON(t *testing.T) {
	var b bytes.Buffer
	if err := PrintJSON(&b, sample); err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != Fail || len(got.Checks) != len(sample) || got.Checks[2] != sample[2] {
		t.Errorf("got %+v", got)
	}
	b.Reset()
	if err := PrintJSON(&b, nil); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"status\": \"OK\",\n  \"checks\": []\n}\n"; b.String() != want {
		t.Errorf("no results: got %q, want %q", b.String(), want)
	}
}

// TestWorst: only a FAIL makes the exit status 1.
func TestWorst(t *testing.T) {
	tests := []struct {
		name     string
		statuses []Status
		worst    Status
		code     int
	}{
		{"none", nil, OK, 0},
		{"all OK", []Status{OK, OK}, OK, 0},
		{"a WARN", []Status{OK, Warn, OK}, Warn, 0},
		{"a FAIL", []Status{Warn, Fail, OK}, Fail, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs []Result
			for _, s := range tt.statuses {
				rs = append(rs, Result{Status: s})
			}
			if got := WorstStatus(rs); got != tt.worst {
				t.Errorf("WorstStatus = %s, want %s", got, tt.worst)
			}
			if got := Worst(rs); got != tt.code {
				t.Errorf("Worst = %d, want %d", got, tt.code)
			}
		})
	}
}
