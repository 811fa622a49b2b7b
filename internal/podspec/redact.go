package podspec

import (
	"net/url"
	"strings"
)

// redacted replaces each secret RedactURL removes.
const redacted = "REDACTED"

// RedactURL returns a manifest URL fit to print: in logs, in /problems, in
// the berth.io/config.origin annotation (which reaches /pods and the
// runtime's sandbox annotations), in errors. Servers take credentials in
// the userinfo and in the query (?token=...), so both go: the password, a
// user name that stands alone (https://TOKEN@host is a common way to pass
// a token), and every query value; the query keys stay, so an operator
// still recognises the URL. url.URL.Redacted covers the password only.
//
// A string that does not parse as a URL is redacted by its text, the same
// way, since it may still carry a secret.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return redactUnparsed(raw)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redacted)
		} else {
			u.User = url.User(redacted)
		}
	}
	u.RawQuery = redactQuery(u.RawQuery)
	return u.String()
}

// redactQuery replaces every value of a raw query with REDACTED, keeping
// the keys and their order. A part without "=" may be a bare token: it is
// replaced whole.
func redactQuery(q string) string {
	if q == "" {
		return q
	}
	parts := strings.Split(q, "&")
	for i, p := range parts {
		key, _, hasValue := strings.Cut(p, "=")
		switch {
		case hasValue:
			parts[i] = key + "=" + redacted
		case p != "":
			parts[i] = redacted
		}
	}
	return strings.Join(parts, "&")
}

// redactUnparsed redacts what looks like a query and a userinfo in a
// string url.Parse refused: everything after the first '?' or '#', and
// everything between the scheme and the last '@' (part of a path may go
// with it: a URL that does not parse is printed for its shape only).
func redactUnparsed(raw string) string {
	s := raw
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i] + "?" + redacted
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	if at := strings.LastIndex(s[start:], "@"); at >= 0 {
		s = s[:start] + redacted + s[start+at:]
	}
	return s
}
