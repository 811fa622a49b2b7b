package doctor

import (
	"context"
	"errors"
	"testing"
)

// TestCheckClock: an unsynchronised clock, or one nobody can tell about,
// is a WARN naming who answered.
func TestCheckClock(t *testing.T) {
	tests := []struct {
		name   string
		state  timeSyncState
		want   Status
		wantIn string
	}{
		{"synchronised", timeSyncState{synced: true, source: "systemd-timedated"}, OK, "synchronised (systemd-timedated)"},
		{"not synchronised", timeSyncState{source: "kernel adjtimex"}, Warn, "not synchronised (kernel adjtimex)"},
		{"unknown", timeSyncState{err: errors.New("adjtimex: operation not permitted")}, Warn, "could not tell whether the clock is synchronised: adjtimex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testEnv(t, nil, nil, Options{})
			e.timeSync = func(context.Context) timeSyncState { return tt.state }
			checkResult(t, e.checkClock(t.Context()), tt.want, tt.wantIn)
		})
	}
}

// TestSystemTimeSync asks the machine: whatever it answers, it names who
// answered or why nobody could.
func TestSystemTimeSync(t *testing.T) {
	st := systemTimeSync(t.Context())
	if st.err == nil && st.source == "" {
		t.Errorf("%+v: an answer without its source", st)
	}
}
