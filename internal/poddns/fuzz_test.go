package poddns

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// FuzzParseResolvConf reads arbitrary resolver files (the host's, which a
// package or DHCP client may write). Every value it keeps is a non-empty
// word of the file, free of blanks and comment characters, and written
// back as a resolv.conf it reads the same.
func FuzzParseResolvConf(f *testing.F) {
	for _, s := range []string{
		"",
		"nameserver 10.0.0.1\nnameserver 10.0.0.2 # second\nsearch example.com. corp ;x\noptions ndots:2 rotate\n",
		"domain a.\nsearch . b..\n",
		"nameserver\nsearch\noptions\n",
		"# only a comment\n\t;\n",
		strings.Repeat("x", 70000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rc, err := parseResolvConf(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		for _, list := range [][]string{rc.nameservers, rc.searches, rc.options} {
			for _, v := range list {
				if v == "" || strings.ContainsAny(v, " \t\r\n\v\f#;") || !strings.Contains(string(data), v) {
					t.Fatalf("value %q of %q", v, data)
				}
			}
		}
		var b strings.Builder
		for _, ns := range rc.nameservers {
			fmt.Fprintf(&b, "nameserver %s\n", ns)
		}
		if len(rc.searches) > 0 {
			fmt.Fprintf(&b, "search %s\n", strings.Join(rc.searches, " "))
		}
		if len(rc.options) > 0 {
			fmt.Fprintf(&b, "options %s\n", strings.Join(rc.options, " "))
		}
		again, err := parseResolvConf(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("written back: %v", err)
		}
		if !slices.Equal(again.nameservers, rc.nameservers) || !slices.Equal(again.searches, rc.searches) || !slices.Equal(again.options, rc.options) {
			t.Fatalf("%q written back as %q reads %+v, first %+v", data, b.String(), again, rc)
		}
	})
}
