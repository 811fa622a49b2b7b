package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
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

	// busService is the bus itself: only the bus may send as it, so its
	// NameOwnerChanged signals are the truth about who owns a name.
	busService   = "org.freedesktop.DBus"
	busPath      = "/org/freedesktop/DBus"
	busInterface = "org.freedesktop.DBus"

	// maxRefusedSenders bounds the senders whose refused signals are
	// logged: each is logged once, and a local user can make unique
	// names without end.
	maxRefusedSenders = 64
)

// dbusLogind is logind on the system bus.
//
// Any local user may emit a signal on the system bus, named as logind's,
// to everyone or to berth alone; believing one would stop every pod. So
// berth believes PrepareForShutdown only from the connection that owns
// org.freedesktop.login1 when the signal arrives: the bus stamps each
// message with its sender's unique name, which nobody can forge and the
// bus never reuses, and only root may own logind's name (its bus policy).
// The owner is learnt once from the bus and then followed through the
// bus's NameOwnerChanged, so a restarted logind is believed too. The
// match rule asks the bus for the owner's signals alone; the check here
// is what holds, since the bus delivers signals sent to berth by name
// whatever its match rules.
type dbusLogind struct {
	conn *dbus.Conn
	log  *slog.Logger
	out  chan bool
	done chan struct{}
	// relayed is closed when relay returns.
	relayed chan struct{}
	// dropIn is the logind.conf.d file RaiseMaxDelay writes.
	dropIn string

	mu sync.Mutex
	// owner is the unique name owning org.freedesktop.login1, "" when
	// nobody does or it is not known yet.
	owner string
	// ownerChanges counts the NameOwnerChanged seen for logind's name: a
	// GetNameOwner answer that raced one is stale.
	ownerChanges int
	// pending are the believed signals' values not yet relayed, in order.
	pending []bool
	// wake tells relay that pending grew.
	wake chan struct{}
	// refused are the senders whose signal was refused and logged.
	refused map[string]bool
}

// systemLogind dials logind on the system bus: DBUS_SYSTEM_BUS_ADDRESS,
// or the standard socket.
func systemLogind(log *slog.Logger) func() (logind, error) {
	return func() (logind, error) { return dialLogind(dbus.ConnectSystemBus, log) }
}

// dialLogind connects to the bus through connect and subscribes to
// PrepareForShutdown and to changes of logind's owner before it asks who
// the owner is and before any lock is taken, so no signal or change is
// missed.
func dialLogind(connect func(...dbus.ConnOption) (*dbus.Conn, error), log *slog.Logger) (logind, error) {
	l := &dbusLogind{log: log, out: make(chan bool), done: make(chan struct{}), relayed: make(chan struct{}),
		dropIn: "/etc/systemd/logind.conf.d/99-berth.conf", wake: make(chan struct{}, 1), refused: map[string]bool{}}
	// The connection hands each signal to DeliverSignal as it reads it,
	// in the bus's order: godbus's default handler may reorder signals
	// when its channel is full, and a change of owner must be seen before
	// the new owner's signals.
	conn, err := connect(dbus.WithSignalHandler(l))
	if err != nil {
		return nil, fmt.Errorf("connect to the system D-Bus: %w", err)
	}
	l.conn = conn
	if err := conn.AddMatchSignal(dbus.WithMatchSender(busService), dbus.WithMatchObjectPath(busPath),
		dbus.WithMatchInterface(busInterface), dbus.WithMatchMember("NameOwnerChanged"), dbus.WithMatchArg(0, logindService)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("subscribe to changes of %s's owner: %w", logindService, err)
	}
	if err := conn.AddMatchSignal(dbus.WithMatchSender(logindService), dbus.WithMatchObjectPath(logindPath),
		dbus.WithMatchInterface(logindInterface), dbus.WithMatchMember("PrepareForShutdown")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("subscribe to logind's PrepareForShutdown: %w", err)
	}
	if err := l.learnOwner(); err != nil {
		conn.Close()
		return nil, err
	}
	go l.relay()
	return l, nil
}

// learnOwner asks the bus who owns logind's name. An answer is kept only
// if no NameOwnerChanged arrived while it was asked: that change may be
// newer than the answer.
func (l *dbusLogind) learnOwner() error {
	for {
		l.mu.Lock()
		changes := l.ownerChanges
		l.mu.Unlock()
		var owner string
		err := l.conn.BusObject().Call(busInterface+".GetNameOwner", 0, logindService).Store(&owner)
		var derr dbus.Error
		if errors.As(err, &derr) && derr.Name == "org.freedesktop.DBus.Error.NameHasNoOwner" {
			owner, err = "", nil
		}
		if err != nil {
			return fmt.Errorf("ask the bus who owns %s: %w", logindService, err)
		}
		l.mu.Lock()
		if l.ownerChanges == changes {
			l.owner = owner
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
	}
}

// DeliverSignal is the connection's signal handler: it follows logind's
// owner and queues the PrepareForShutdown values of that owner. It runs
// on the connection's reading goroutine, so it never blocks.
func (l *dbusLogind) DeliverSignal(iface, member string, s *dbus.Signal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case s.Sender == busService && s.Path == busPath && iface == busInterface && member == "NameOwnerChanged":
		if len(s.Body) != 3 {
			return
		}
		name, _ := s.Body[0].(string)
		newOwner, ok := s.Body[2].(string)
		if name != logindService || !ok {
			return
		}
		l.owner = newOwner
		l.ownerChanges++
	case s.Path == logindPath && iface == logindInterface && member == "PrepareForShutdown":
		if s.Sender == "" || s.Sender != l.owner {
			l.refuseLocked(s.Sender)
			return
		}
		if len(s.Body) != 1 {
			return
		}
		if v, ok := s.Body[0].(bool); ok {
			l.pending = append(l.pending, v)
			select {
			case l.wake <- struct{}{}:
			default:
			}
		}
	}
}

// refuseLocked logs a refused PrepareForShutdown once per sender, for at
// most maxRefusedSenders senders.
func (l *dbusLogind) refuseLocked(sender string) {
	if l.refused[sender] || len(l.refused) >= maxRefusedSenders {
		return
	}
	l.refused[sender] = true
	l.log.Warn("ignoring PrepareForShutdown from non-owner", "sender", sender, "owner", l.owner, "name", logindService)
	if len(l.refused) == maxRefusedSenders {
		l.log.Warn("further senders of PrepareForShutdown that are not logind are ignored without a log", "senders", maxRefusedSenders)
	}
}

// relay hands the queued values to PrepareForShutdown's reader in order,
// until Close.
func (l *dbusLogind) relay() {
	defer close(l.relayed)
	for {
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.mu.Unlock()
			select {
			case <-l.done:
				return
			case <-l.wake:
			}
			continue
		}
		v := l.pending[0]
		l.pending = l.pending[1:]
		l.mu.Unlock()
		select {
		case l.out <- v:
		case <-l.done:
			return
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
	err := l.conn.Close()
	<-l.relayed
	return err
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
