package syncloop

import (
	"log/slog"
	"sync"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notifier speaks the sd_notify protocol when berth runs under systemd
// (NOTIFY_SOCKET set) and does nothing otherwise.
type notifier struct {
	log *slog.Logger
	// watchdog is whether systemd asked for keep-alives (WatchdogSec set,
	// so WATCHDOG_USEC is in the environment).
	watchdogOn bool

	mu         sync.Mutex // guards lastStatus
	lastStatus string
}

// send delivers one sd_notify message; a failure is logged, never fatal:
// systemd going away must not take the pods' agent down.
func (n *notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("sd_notify", "state", state, "err", err)
	}
}

// newNotifier reads from the environment whether systemd wants watchdog
// keep-alives; the housekeeping tick (2s) is well within any sane
// WatchdogSec.
func newNotifier(log *slog.Logger) *notifier {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("systemd watchdog settings", "err", err)
	}
	return &notifier{log: log, watchdogOn: interval > 0}
}

func (n *notifier) ready()    { n.send(daemon.SdNotifyReady) }
func (n *notifier) stopping() { n.send(daemon.SdNotifyStopping) }

func (n *notifier) watchdog() {
	if n.watchdogOn {
		n.send(daemon.SdNotifyWatchdog)
	}
}

// status sends STATUS= when the summary changed since the last one.
func (n *notifier) status(s string) {
	n.mu.Lock()
	if s == n.lastStatus {
		n.mu.Unlock()
		return
	}
	n.lastStatus = s
	n.mu.Unlock()
	n.send("STATUS=" + s)
}
