package doctor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// eventsGrace is how long a freshly opened event stream must stay open to
// count: a runtime without the call (containerd 1.6) accepts the
// subscription and fails only its first read. It is the daemon's own
// grace (syncloop's eventsGrace).
const eventsGrace = time.Second

// checkEvents opens the CRI container event stream as the daemon does and
// reports whether the runtime serves it: an event, or a stream still open
// after eventsGrace, is OK; Unimplemented is a WARN, since berth then
// relists the runtime every second instead of every 30 s.
//
// containerd 1.7 is the exception: it serves the stream, but splits one
// queue of events between all its subscribers, so a stream of doctor's
// would take events meant for a running berth's. It is known by its
// version instead, and no stream is opened.
func (e *env) checkEvents(ctx context.Context, ri *runtimeInfo) Result {
	const check = "runtime-events"
	if ri.err != nil {
		return notChecked(check)
	}
	if major, minor, ok := releaseOf(ri.version.GetRuntimeVersion()); ri.version.GetRuntimeName() == "containerd" && ok && major == 1 && minor == 7 {
		return Result{Check: check, Status: OK, Message: ri.name() + " streams container events (known by its release: a stream of doctor's would take events from berth's)"}
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, 1)
	opened := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.rs.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(opened) })
	}()
	ok := Result{Check: check, Status: OK, Message: ri.name() + " streams container events"}
	var grace <-chan time.Time
	for {
		select {
		case <-opened:
			opened = nil
			grace = e.opts.Clock.After(eventsGrace)
		case <-ch:
			cancel()
			<-done
			return ok
		case <-grace:
			cancel()
			<-done
			return ok
		case err := <-done:
			return eventsUnsupported(ri, err, ctx.Err() != nil)
		}
	}
}

// eventsUnsupported is the line of a stream that ended before it counted.
// timedOut says the check's own deadline ended it.
func eventsUnsupported(ri *runtimeInfo, err error, timedOut bool) Result {
	r := Result{Check: "runtime-events", Status: Warn,
		Fix: "berth works as is; containerd 1.7 or newer (or CRI-O 1.26 or newer with --enable-pod-events) streams events and spares the relisting"}
	switch {
	case err == nil, status.Code(err) == codes.Unimplemented:
		r.Message = ri.name() + " streams no container events: berth relists its containers every second instead of every 30 s"
	case timedOut:
		r.Message = ri.name() + " did not open its container event stream in time: berth relists its containers every second until it does"
		r.Fix = "see the runtime's log (journalctl -u containerd)"
	default:
		r.Message = fmt.Sprintf("%s's container event stream failed (%v): berth relists its containers every second until it works", ri.name(), err)
		r.Fix = "see the runtime's log (journalctl -u containerd)"
	}
	return r
}

// releaseOf reads major and minor from "v2.1.9", "1.7.27" or "1.6.20~ds1".
func releaseOf(version string) (major, minor int, ok bool) {
	fields := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(fields) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(fields[0])
	minor, err2 := strconv.Atoi(strings.TrimRightFunc(fields[1], func(r rune) bool { return r < '0' || r > '9' }))
	return major, minor, err1 == nil && err2 == nil
}
