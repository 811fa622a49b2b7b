package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// FuzzParseLogOptions parses arbitrary query strings of a log request. It
// never panics; a refusal is a 400 with a message; an accepted request
// means exactly what its parameters say, with every bool as strconv reads
// it, tailLines -1 (all) or a count of 0 or more, and since
// from at most one of sinceSeconds (1 or more, back from now) and
// sinceTime.
func FuzzParseLogOptions(f *testing.F) {
	for _, q := range []string{
		"", "container=web&tailLines=1&timestamps=true", "previous=1", "follow=yes", "tailLines=-3",
		"tailLines=99999999999999999999", "container=%2e%2e%2fetc", "follow=true&follow=false", "tailLines=+5", "%zz",
		"sinceSeconds=10", "sinceTime=2026-11-21T12:00:00Z", "sinceSeconds=1&sinceTime=2026-11-21T12:00:00Z", "sinceSeconds=-1", "sinceTime=2026-11-21T12:00:00.5+02:00",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := httptest.NewRequest(http.MethodGet, "/pods/default/web/log", nil)
		r.URL.RawQuery = rawQuery
		o, err := parseLogOptions(r, apiT0)
		if err != nil {
			var le *logRequestError
			if !errors.As(err, &le) || le.status != http.StatusBadRequest || le.msg == "" {
				t.Fatalf("refusal %v is not a 400 with a message", err)
			}
			return
		}
		q, _ := url.ParseQuery(rawQuery)
		if o.container != q.Get("container") {
			t.Fatalf("container %q, query says %q", o.container, q.Get("container"))
		}
		for name, got := range map[string]bool{"follow": o.follow, "previous": o.previous, "timestamps": o.timestamps} {
			want := false
			if v := q.Get(name); v != "" {
				want, _ = strconv.ParseBool(v)
			}
			if got != want {
				t.Fatalf("%s = %v, query says %q", name, got, q.Get(name))
			}
		}
		secs, at := q.Get("sinceSeconds"), q.Get("sinceTime")
		switch {
		case secs != "" && at != "":
			t.Fatalf("accepted both sinceSeconds %q and sinceTime %q", secs, at)
		case secs == "" && at == "" && !o.since.IsZero():
			t.Fatalf("since %v without a parameter", o.since)
		case secs != "" && !o.since.Equal(apiT0.Add(-time.Duration(mustAtoi(t, secs))*time.Second)):
			t.Fatalf("since %v, sinceSeconds %q", o.since, secs)
		case secs != "" && !o.since.Before(apiT0):
			t.Fatalf("since %v is not in the past (sinceSeconds %q)", o.since, secs)
		}
		switch v := q.Get("tailLines"); {
		case v == "" && o.tailLines != -1:
			t.Fatalf("tailLines %d without the parameter", o.tailLines)
		case v != "" && (o.tailLines < 0 || strconv.Itoa(o.tailLines) != strconv.Itoa(mustAtoi(t, v))):
			t.Fatalf("tailLines %d, query says %q", o.tailLines, v)
		}
	})
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("accepted a count %q: %v", s, err)
	}
	return n
}
