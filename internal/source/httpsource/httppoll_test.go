package httpsource

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// pollStep is one poll's outcome and the delay the schedule must pick
// after it.
type pollStep struct {
	failed bool
	header http.Header
	want   time.Duration
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestPollSchedule walks the schedule through sequences of answers with the
// jitter's random number fixed, so every delay is exact: the spread of a
// fresh fleet, the ±10% steady jitter, the back-off doubling to its cap
// with equal jitter and its reset, and the server's holds with their floor
// and ceiling.
func TestPollSchedule(t *testing.T) {
	const period = 20 * time.Second
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	ok := func(want time.Duration, kv ...string) pollStep { return pollStep{false, hdr(kv...), want} }
	fail := func(want time.Duration, kv ...string) pollStep { return pollStep{true, hdr(kv...), want} }
	noAnswer := func(want time.Duration) pollStep { return pollStep{true, nil, want} }
	for _, tt := range []struct {
		name       string
		rand       float64
		backoffMax time.Duration
		steps      []pollStep
	}{
		{"unjittered (0.5): spread start, period, back-off to the cap, reset", 0.5, 5 * time.Minute, []pollStep{
			ok(10 * time.Second), ok(period), ok(period),
			fail(30 * time.Second), noAnswer(60 * time.Second), fail(120 * time.Second),
			fail(225 * time.Second), fail(225 * time.Second), // cap 5m: between 2.5m and 5m
			ok(period), fail(30 * time.Second),
		}},
		{"lowest draw: poll at once after the first answer, -10%, back-off never below the period", 0, 5 * time.Minute, []pollStep{
			ok(0), ok(18 * time.Second), fail(period), fail(40 * time.Second), ok(18 * time.Second),
		}},
		{"high draw: +5% at 0.75", 0.75, 5 * time.Minute, []pollStep{
			ok(15 * time.Second), ok(21 * time.Second), fail(35 * time.Second),
		}},
		{"a failure before any answer backs off, the first answer then spreads", 0.5, 5 * time.Minute, []pollStep{
			noAnswer(30 * time.Second), ok(10 * time.Second), ok(period),
		}},
		{"back-off maximum below the period is the period", 0.5, time.Second, []pollStep{
			ok(10 * time.Second), fail(period), fail(period),
		}},
		{"max-age defers, plus jitter on top; Age counts; never faster than the period", 0.5, 5 * time.Minute, []pollStep{
			ok(63*time.Second, "Cache-Control", "public, max-age=60"),
			ok(63*time.Second, "Cache-Control", `max-age="60"`),
			ok(period, "Cache-Control", "max-age=60", "Age", "50"),
			ok(period, "Cache-Control", "max-age=5"),
			ok(period, "Cache-Control", "max-age=60, no-cache"),
			ok(period, "Cache-Control", "no-store", "Cache-Control", "max-age=60"),
			ok(42*time.Second, "Cache-Control", "max-age=60", "Cache-Control", "max-age=40"),
			ok(period, "Cache-Control", "max-age=-60"),
			ok(period, "Cache-Control", "max-age=1e9"),
		}},
		{"a hostile max-age is capped at 10 periods or the back-off maximum", 0.5, 5 * time.Minute, []pollStep{
			ok(10 * time.Second), ok(315*time.Second, "Cache-Control", "max-age=999999999999999999999999"),
			ok(315*time.Second, "Cache-Control", "max-age=31536000"),
		}},
		{"ten periods above the back-off maximum", 0.5, time.Minute, []pollStep{
			ok(10 * time.Second), ok(210*time.Second, "Cache-Control", "max-age=86400"),
		}},
		{"Retry-After in seconds and as a date, on errors only", 0.5, 5 * time.Minute, []pollStep{
			fail(126*time.Second, "Retry-After", "120"),
			fail(60*time.Second, "Retry-After", "0"),
			fail(126*time.Second, "Retry-After", date(120*time.Second), "Date", date(0)),
			fail(225*time.Second, "Retry-After", date(-time.Hour), "Date", date(0)),
			fail(225*time.Second, "Retry-After", "soon"),
			fail(315*time.Second, "Retry-After", "99999999999999999999"),
			fail(315*time.Second, "Retry-After", date(30*24*time.Hour)),
			ok(10*time.Second, "Retry-After", "120"),
			fail(30*time.Second, "Cache-Control", "max-age=120"),
		}},
		{"Retry-After as a date without Date counts from berth's clock", 0.5, 5 * time.Minute, []pollStep{
			fail(105*time.Second, "Retry-After", date(100*time.Second)),
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPollSchedule(period, tt.backoffMax, func() float64 { return tt.rand })
			for i, st := range tt.steps {
				if got := p.next(st.failed, st.header, now); got != st.want {
					t.Fatalf("step %d (failed %v, %v): delay %s, want %s", i, st.failed, st.header, got, st.want)
				}
			}
		})
	}
}

// TestHTTPSourceHonoursRetryAfter checks the source waits as its schedule
// says, on the source's clock: a 503 with Retry-After defers the next poll
// to exactly the hold (the jitter's draw is fixed at its lowest), and
// conditional requests carry on after it.
func TestHTTPSourceHonoursRetryAfter(t *testing.T) {
	fake := &fakeServer{status: http.StatusOK, etag: `"v1"`, body: podspectest.List(podspectest.Manifest("a", "img:1"))}
	clk := &timerClock{FakeClock: clocktesting.NewFakeClock(time.Now()), delays: make(chan time.Duration, 10)}
	st := watchedSource(t, Config{
		URL: "http://manifests.example/pods", HTTPCheckFrequency: 20 * time.Second,
		HTTPClient: &http.Client{Transport: retryAfterServer{fake}}, Clock: clk,
		Rand: func() float64 { return 0 },
	})
	if got := next(t, st); got != "ADD a-node1 img:1" {
		t.Fatalf("first answer: %q", got)
	}
	// The lowest draw spreads a fresh fleet's second poll to "at once".
	if d := <-clk.delays; d != 0 {
		t.Fatalf("delay after the first answer %s, want 0", d)
	}
	fake.set(http.StatusServiceUnavailable, "", "", false)
	clk.Step(0)
	if d := <-clk.delays; d != 300*time.Second {
		t.Fatalf("delay after a 503 with Retry-After: 300 is %s, want 300s", d)
	}
	if n := fake.count(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	fake.set(http.StatusOK, `"v1"`, podspectest.List(podspectest.Manifest("a", "img:1")), false)
	clk.Step(300 * time.Second)
	if d := <-clk.delays; d != 18*time.Second {
		t.Fatalf("delay after the answer that ended the hold %s, want the period -10%%", d)
	}
	if got := fake.last().Header.Get("If-None-Match"); got != `"v1"` {
		t.Errorf("If-None-Match after the hold = %q", got)
	}
	if ps := st.Problems(); len(ps) != 0 {
		t.Errorf("problems after the server answered again: %+v", ps)
	}
	if got := len(st.Pods()); got != 1 {
		t.Errorf("%d pods, want the one the server served all along", got)
	}
	if got := st.Versions()[podspec.SourceHTTP]; got != `"v1"` {
		t.Errorf("version of the URL source = %q, want its ETag", got)
	}
}

// timerClock is a fake clock that reports the delay of every timer the
// source arms for its next poll (the request timeout uses AfterFunc).
type timerClock struct {
	*clocktesting.FakeClock
	delays chan time.Duration
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.delays <- d
	return t
}

// retryAfterServer adds Retry-After: 300 to the fake server's 503s.
type retryAfterServer struct{ *fakeServer }

func (s retryAfterServer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.fakeServer.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
		resp.Header.Set("Retry-After", "300")
	}
	return resp, err
}

// FuzzPollHints feeds the schedule response headers berth does not
// control: whatever they say, the next poll comes after at least the
// jittered period and at most the ceiling plus its jitter, and a parse
// never yields a negative hold.
func FuzzPollHints(f *testing.F) {
	f.Add("max-age=60", "10", "", "", false)
	f.Add("no-cache, max-age=60", "", "", "", false)
	f.Add("", "", "120", "", true)
	f.Add("", "", "Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:20:00 GMT", true)
	f.Add("max-age=\"99999999999999999999\"", "-1", "", "", false)
	f.Fuzz(func(t *testing.T, cacheControl, age, retry, date string, failed bool) {
		h := http.Header{}
		for k, v := range map[string]string{"Cache-Control": cacheControl, "Age": age, "Retry-After": retry, "Date": date} {
			if v != "" {
				h[k] = strings.Split(v, "\n")
			}
		}
		now := time.Date(2015, 10, 21, 7, 20, 0, 0, time.UTC)
		if hold := serverHold(h, failed, now); hold < 0 {
			t.Fatalf("negative hold %s", hold)
		}
		const period = 20 * time.Second
		for _, r := range []float64{0, 0.5, 0.999} {
			p := newPollSchedule(period, 5*time.Minute, func() float64 { return r })
			p.answered = true // past the fresh fleet's spread
			d := p.next(failed, h, now)
			if low, high := time.Duration(float64(period)*(1-pollJitter)), time.Duration(float64(p.ceiling())*(1+pollJitter)); d < low || d > high {
				t.Fatalf("delay %s outside [%s, %s]", d, low, high)
			}
		}
	})
}
