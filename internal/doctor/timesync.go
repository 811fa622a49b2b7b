package doctor

import (
	"context"
	"fmt"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// timeSyncState is whether the system clock is synchronised, and who said.
type timeSyncState struct {
	synced bool
	source string // what answered: timedated or adjtimex
	err    error  // neither could tell
}

// The timedated D-Bus names: NTPSynchronized is what `timedatectl`
// prints as "System clock synchronized".
const (
	timedateService  = "org.freedesktop.timedate1"
	timedatePath     = "/org/freedesktop/timedate1"
	timedateProperty = "org.freedesktop.timedate1.NTPSynchronized"
)

// systemTimeSync asks systemd-timedated for NTPSynchronized, so doctor
// says what `timedatectl` says; without a system bus or timedated (a
// container, a system without systemd) it reads the kernel's own flag,
// adjtimex(2)'s STA_UNSYNC, from which timedated computes its answer.
func systemTimeSync(ctx context.Context) timeSyncState {
	if synced, err := timedatedSynced(ctx); err == nil {
		return timeSyncState{synced: synced, source: "systemd-timedated"}
	}
	var tx unix.Timex // Modes 0: read only
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return timeSyncState{err: fmt.Errorf("adjtimex: %w", err)}
	}
	return timeSyncState{synced: tx.Status&unix.STA_UNSYNC == 0 && state != unix.TIME_ERROR, source: "kernel adjtimex"}
}

// timedatedSynced reads timedated's NTPSynchronized over the system bus.
func timedatedSynced(ctx context.Context) (bool, error) {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	v, err := conn.Object(timedateService, timedatePath).GetProperty(timedateProperty)
	if err != nil {
		return false, err
	}
	synced, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("%s is %s, not a boolean", timedateProperty, v.Signature())
	}
	return synced, nil
}

// checkClock: the system clock is synchronised. An unsynchronised clock
// is a WARN: berth runs, but certificate checks of --manifest-url and
// registries, and the times in pod status and logs, are only as right as
// the clock.
func (e *env) checkClock(ctx context.Context) Result {
	r := Result{Check: "clock"}
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	st := e.timeSync(ctx)
	switch {
	case st.err != nil:
		r.Status, r.Message = Warn, "could not tell whether the clock is synchronised: "+st.err.Error()
		r.Fix = "check timedatectl (or chronyc tracking)"
	case !st.synced:
		r.Status = Warn
		r.Message = "the system clock is not synchronised (" + st.source + "): TLS certificate checks of --manifest-url and registries, and the times berth reports, depend on it"
		r.Fix = "enable NTP: timedatectl set-ntp true (systemd-timesyncd), or install chrony"
	default:
		r.Status, r.Message = OK, "the system clock is synchronised ("+st.source+")"
	}
	return r
}
