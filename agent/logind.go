package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
	"k8s.io/utils/clock"
)

// logind is what graceful node shutdown needs of systemd-logind, over the
// system D-Bus: a delay inhibitor lock, its maximum delay, and the
// PrepareForShutdown signal. An interface so the shutdown manager can be
// tested without a system bus.
type logind interface {
	// Inhibit takes a delay lock on shutdown; closing the file releases it.
	Inhibit(who, why string) (*os.File, error)
	// MaxDelay is logind's InhibitDelayMaxUSec: how long it waits for
	// delay locks at most.
	MaxDelay() (time.Duration, error)
	// RaiseMaxDelay makes logind wait at least d, through a drop-in of its
	// configuration and a reload, as the kubelet does.
	RaiseMaxDelay(d time.Duration) error
	// PrepareForShutdown delivers the signal's argument: true when a
	// shutdown begins, false when it was cancelled.
	PrepareForShutdown() <-chan bool
	Close() error
}

const (
	logindService   = "org.freedesktop.login1"
	logindPath      = "/org/freedesktop/login1"
	logindInterface = "org.freedesktop.login1.Manager"
)

// dbusLogind is logind on the system bus.
type dbusLogind struct {
	conn    *dbus.Conn
	signals chan *dbus.Signal
	out     chan bool
	done    chan struct{}
	// dropIn is the logind.conf.d file RaiseMaxDelay writes.
	dropIn string
}

// dialLogind connects to the system bus and subscribes to
// PrepareForShutdown before any lock is taken, so no signal is missed.
func dialLogind() (logind, error) {
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		return nil, fmt.Errorf("connect to the system D-Bus: %w", err)
	}
	if err := conn.AddMatchSignal(dbus.WithMatchInterface(logindInterface), dbus.WithMatchMember("PrepareForShutdown"), dbus.WithMatchObjectPath(logindPath)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("subscribe to logind's PrepareForShutdown: %w", err)
	}
	l := &dbusLogind{conn: conn, signals: make(chan *dbus.Signal, 4), out: make(chan bool, 4), done: make(chan struct{}),
		dropIn: "/etc/systemd/logind.conf.d/99-berth.conf"}
	conn.Signal(l.signals)
	go l.relay()
	return l, nil
}

// relay turns D-Bus signals into PrepareForShutdown values until Close.
func (l *dbusLogind) relay() {
	for {
		select {
		case <-l.done:
			return
		case s, ok := <-l.signals:
			if !ok {
				return
			}
			if s.Name != logindInterface+".PrepareForShutdown" || len(s.Body) != 1 {
				continue
			}
			if v, ok := s.Body[0].(bool); ok {
				select {
				case l.out <- v:
				case <-l.done:
					return
				}
			}
		}
	}
}

func (l *dbusLogind) Inhibit(who, why string) (*os.File, error) {
	var fd dbus.UnixFD
	err := l.conn.Object(logindService, logindPath).Call(logindInterface+".Inhibit", 0, "shutdown", who, why, "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("take a shutdown delay lock from logind: %w", err)
	}
	return os.NewFile(uintptr(fd), "logind-inhibitor"), nil
}

func (l *dbusLogind) MaxDelay() (time.Duration, error) {
	v, err := l.conn.Object(logindService, logindPath).GetProperty(logindInterface + ".InhibitDelayMaxUSec")
	if err != nil {
		return 0, fmt.Errorf("read logind's InhibitDelayMaxUSec: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("logind's InhibitDelayMaxUSec is a %T", v.Value())
	}
	return time.Duration(usec) * time.Microsecond, nil
}

func (l *dbusLogind) RaiseMaxDelay(d time.Duration) error {
	content := "# Written by berth: its shutdownGracePeriod needs logind to wait this long for it.\n[Login]\nInhibitDelayMaxSec=" +
		strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10) + "\n"
	if err := os.MkdirAll(filepath.Dir(l.dropIn), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(l.dropIn, []byte(content), 0o644); err != nil {
		return err
	}
	// logind rereads its configuration on SIGHUP.
	call := l.conn.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").Call(
		"org.freedesktop.systemd1.Manager.KillUnit", 0, "systemd-logind.service", "main", int32(syscall.SIGHUP))
	if call.Err != nil {
		return fmt.Errorf("reload systemd-logind: %w", call.Err)
	}
	return nil
}

func (l *dbusLogind) PrepareForShutdown() <-chan bool { return l.out }

func (l *dbusLogind) Close() error {
	select {
	case <-l.done:
		return errors.New("closed twice")
	default:
	}
	close(l.done)
	l.conn.RemoveSignal(l.signals)
	return l.conn.Close()
}

// waitMaxDelay polls logind until its maximum delay reaches d or ctx ends:
// the reload is asynchronous.
func waitMaxDelay(ctx context.Context, clk clock.Clock, l logind, d time.Duration) (time.Duration, error) {
	for i := 0; ; i++ {
		got, err := l.MaxDelay()
		if err != nil || got >= d || i == 20 {
			return got, err
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-clk.After(100 * time.Millisecond):
		}
	}
}
