package podspec

import (
	"net/url"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://manifests.example/pods.yaml", "https://manifests.example/pods.yaml"},
		{"https://user:pa55word@manifests.example/pods", "https://user:REDACTED@manifests.example/pods"},
		{"https://ghp_t0ken@manifests.example/pods", "https://REDACTED@manifests.example/pods"},
		{"https://user:@manifests.example/pods", "https://user:REDACTED@manifests.example/pods"},
		{"http://10.0.0.1:8000/pods?token=t0ken", "http://10.0.0.1:8000/pods?token=REDACTED"},
		{"http://h/pods?b=2&a=1&a=3&empty=&flag", "http://h/pods?b=REDACTED&a=REDACTED&a=REDACTED&empty=REDACTED&REDACTED"},
		{"http://h/pods?", "http://h/pods?"},
		{"http://h/p%20ods?x=%41", "http://h/p%20ods?x=REDACTED"},
		{"http://u:pa55word@h/pods?sig=a%3Db#frag", "http://u:REDACTED@h/pods?sig=REDACTED#frag"},
		{"", ""},
		// url.Parse refuses these; the text is redacted all the same.
		{"http://u:pa55word@h/%zz?token=t0ken", "http://REDACTED@h/%zz?REDACTED"},
		{"http://u:pa55word@[::1/pods", "http://REDACTED@[::1/pods"},
		{"http://h/\x7f?token=t0ken", "http://h/\x7f?REDACTED"},
	} {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzRedactURL checks that whatever RedactURL prints, read back as a URL,
// holds no password, no lone user name and no query value but REDACTED.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"https://user:pa55word@h/p?token=t0ken&a", "http://t0ken@h:80/", "http://h/%zz?x=1", "://@?", "a@b?c=d#e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out := RedactURL(raw)
		u, err := url.Parse(out)
		if err != nil {
			return
		}
		if u.User != nil {
			if p, ok := u.User.Password(); ok && p != redacted {
				t.Fatalf("RedactURL(%q) = %q keeps the password %q", raw, out, p)
			}
			if _, ok := u.User.Password(); !ok && u.User.Username() != "" && u.User.Username() != redacted {
				t.Fatalf("RedactURL(%q) = %q keeps the lone user name %q", raw, out, u.User.Username())
			}
		}
		for _, part := range strings.Split(u.RawQuery, "&") {
			if _, v, ok := strings.Cut(part, "="); ok && v != redacted || !ok && part != "" && part != redacted {
				t.Fatalf("RedactURL(%q) = %q keeps the query part %q", raw, out, part)
			}
		}
	})
}

// TestHTTPOriginKeepsUID pins the UID of a URL pod to what berth computed
// before RedactURL: a new berth must not restart every URL pod.
func TestHTTPOriginKeepsUID(t *testing.T) {
	u, err := url.Parse("https://user:pa55word@manifests.example/pods?token=t0ken")
	if err != nil {
		t.Fatal(err)
	}
	res := Parse([]byte(podspectest.Manifest("a", "img:1")), HTTPOrigin(u), podspectest.Node)
	if len(res.Pods) != 1 {
		t.Fatalf("parse: %+v", res)
	}
	p := res.Pods[0]
	if p.UID != "d816f50a11a329aed1fa75f2e3c6a2a6" {
		t.Errorf("UID = %s, want d816f50a11a329aed1fa75f2e3c6a2a6 (the UID earlier berths gave this pod)", p.UID)
	}
	if got, want := p.Annotations[AnnotationOrigin], "https://user:REDACTED@manifests.example/pods?token=REDACTED"; got != want {
		t.Errorf("%s = %q, want %q", AnnotationOrigin, got, want)
	}
}
