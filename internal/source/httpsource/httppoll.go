package httpsource

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Poll scheduling of the HTTP source. A fleet of thousands of berths
// polling one web server must neither poll in lock-step (a burst of N
// requests every period, and N at once after a power cut) nor hammer a
// server that is down or asks for a pause. So:
//
//   - the steady period is jittered by ±pollJitter;
//   - the first delay after the first answer is uniform in [0, period),
//     spreading a fleet that started together over the whole period (the
//     first poll itself is made at once: a booting device must not wait to
//     learn what to run);
//   - a failed poll backs off: failure n waits a random time between half
//     and all of period·2^n, or of the back-off maximum once that is
//     reached ("equal jitter": spread, yet never a quick retry), and never
//     less than the period;
//   - a server may defer the next poll with Cache-Control max-age (on an
//     answer) or Retry-After (on an error), never beyond holdFactor periods
//     or the back-off maximum, whichever is longer, so a hostile or
//     misconfigured server cannot stop a fleet from polling for days; a
//     server cannot make berth poll faster than its period either.
const (
	pollJitter = 0.1
	holdFactor = 10
	// DefaultHTTPBackoffMax is the longest wait after failed polls.
	DefaultHTTPBackoffMax = 5 * time.Minute
)

// pollSchedule decides when the HTTP source polls next. It is owned by the
// source's goroutine.
type pollSchedule struct {
	period     time.Duration
	backoffMax time.Duration // at least period
	// rand returns a uniform number in [0, 1): the jitter's only source,
	// so a test fixes it and a fleet simulation can turn jitter off (0.5
	// gives the unjittered delays).
	rand func() float64

	answered bool // an answer (not a failure) was scheduled after
	failures int  // consecutive failed polls
}

func newPollSchedule(period, backoffMax time.Duration, rand func() float64) *pollSchedule {
	return &pollSchedule{period: period, backoffMax: max(backoffMax, period), rand: rand}
}

// ceiling is the longest a server may defer the next poll.
func (p *pollSchedule) ceiling() time.Duration {
	return max(holdFactor*p.period, p.backoffMax)
}

// next returns how long to wait after a poll. failed is whether the poll
// failed (no answer, an error status, or a body berth could not take);
// header is the response's header, nil when there was no response; now is
// the source clock's time, for a Retry-After date without a Date header.
func (p *pollSchedule) next(failed bool, header http.Header, now time.Time) time.Duration {
	var d time.Duration
	switch {
	case failed:
		p.failures++
		base := p.backoffMax
		if p.failures < 30 { // beyond, the shift could overflow; the cap is reached long before
			base = min(p.period<<p.failures, p.backoffMax)
		}
		d = max(base/2+p.scale(base/2, p.rand()), p.period)
	case !p.answered:
		p.answered, p.failures = true, 0
		d = p.scale(p.period, p.rand())
	default:
		p.failures = 0
		d = p.scale(p.period, 1-pollJitter+2*pollJitter*p.rand())
	}
	if hold := serverHold(header, failed, now); hold > 0 {
		hold = min(hold, p.ceiling())
		// A hold is a floor; jitter goes on top so that a fleet told the
		// same Retry-After date does not come back in one burst.
		if hold = p.scale(hold, 1+pollJitter*p.rand()); hold > d {
			d = hold
		}
	}
	return d
}

// scale is d·f without overflow for the durations in play.
func (p *pollSchedule) scale(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * f)
}

// serverHold is how long the server asked berth not to poll: Retry-After
// (seconds or an HTTP date) on a failed answer, the freshness left from
// Cache-Control max-age (minus Age) on a good one, 0 for none. It is not
// bounded here; the schedule caps it.
func serverHold(h http.Header, failed bool, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if failed {
		return retryAfter(h, now)
	}
	return freshness(h)
}

// maxHoldSeconds bounds parsed numbers before they become a Duration.
const maxHoldSeconds = 1 << 32

// retryAfter parses Retry-After: delay-seconds or an HTTP-date, measured
// from the response's Date when it has one (so the server's clock and
// berth's need not agree), else from now.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, ok := parseSeconds(v); ok {
		return time.Duration(secs) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	if d := at.Sub(now); d > 0 && d < maxHoldSeconds*time.Second {
		return d
	}
	return 0
}

// freshness is max-age minus Age from Cache-Control; no-cache and no-store
// mean none. Several max-age directives (invalid) take the smallest.
func freshness(h http.Header) time.Duration {
	maxAge := int64(-1)
	for _, line := range h.Values("Cache-Control") {
		for _, dir := range strings.Split(line, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(dir), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-cache", "no-store":
				return 0
			case "max-age":
				secs, ok := parseSeconds(strings.Trim(strings.TrimSpace(val), `"`))
				if ok && (maxAge < 0 || secs < maxAge) {
					maxAge = secs
				}
			}
		}
	}
	if maxAge <= 0 {
		return 0
	}
	if age, ok := parseSeconds(strings.TrimSpace(h.Get("Age"))); ok {
		maxAge -= age
	}
	if maxAge <= 0 {
		return 0
	}
	return time.Duration(maxAge) * time.Second
}

// parseSeconds reads a non-negative decimal number of seconds (RFC 9110's
// delay-seconds), saturating at maxHoldSeconds so that a huge value is a
// long hold (which the schedule caps), not an overflow.
func parseSeconds(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxHoldSeconds {
		return maxHoldSeconds, true // digits only: the error is the range
	}
	return n, true
}
