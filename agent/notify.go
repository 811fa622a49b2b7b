package agent

import (
	"log/slog"
	"sync"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notifier speaks the sd_notify protocol when berth runs under systemd
// (NOTIFY_SOCKET set) and does nothing otherwise.
type notifier struct {
	log *slog.Logger

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

func (n *notifier) ready()    { n.send(daemon.SdNotifyReady) }
func (n *notifier) stopping() { n.send(daemon.SdNotifyStopping) }
func (n *notifier) watchdog() { n.send(daemon.SdNotifyWatchdog) }

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
