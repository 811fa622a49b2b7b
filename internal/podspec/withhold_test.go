package podspec

import (
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

// TestSecretValuesWithheld: no problem of a Secret, or of a manifest whose
// failing document may be one, quotes what the Secret holds, yet each
// keeps its line, its field and what went wrong. The secret text is
// "S3cr3t" throughout; documents that cannot be a Secret keep the
// decoder's message whole.
func TestSecretValuesWithheld(t *testing.T) {
	const secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n" // lines 1-3
	const (
		name   = "(name withheld: it may be a Secret's value)"
		value  = "(value withheld: it may be a Secret's value)"
		key    = "(key withheld: it may be a Secret's value)"
		whole  = "(message withheld: it may quote a Secret's value)"
		anchor = `invalid YAML: an alias refers to an unknown anchor; a value starting with "*" is read as an alias and must be quoted ` + name
	)
	tests := []struct {
		name      string
		in        string
		line      int
		field     string
		msg       string
		keepsText bool // not a Secret: the message may quote
	}{
		{name: "unknown anchor: a password starting with *", in: secret + "stringData:\n  password: *S3cr3t\n",
			line: 5, msg: anchor},
		{name: "unknown anchor in a Pod after a Secret", in: secret + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: *S3cr3t}]\n",
			line: 9, msg: anchor},
		{name: "unknown anchor, the kind spelled with escapes", in: "apiVersion: v1\nkind: \"\\x53ecret\"\nmetadata: {name: s}\nstringData: {password: *S3cr3t}\n",
			line: 4, msg: anchor},
		{name: "unknown anchor in a Pod alone", in: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: *S3cr3t}]\n",
			line: 5, msg: "invalid YAML: unknown anchor 'S3cr3t' referenced", keepsText: true},
		{name: "tagged value that does not resolve", in: secret + "stringData:\n  password: !!int S3cr3t\n",
			line: 1, msg: `Secret "s": invalid YAML: cannot decode a !!str as a !!int ` + value},
		{name: "tagged timestamp", in: secret + "stringData:\n  password: !!timestamp S3cr3t\n",
			line: 1, msg: `Secret "s": invalid YAML: cannot decode a !!str as a !!timestamp ` + value},
		{name: "duplicate key inside a value", in: secret + "stringData:\n  password: {S3cr3t: a, S3cr3t: b}\n",
			line: 5, msg: `Secret "s": invalid YAML: mapping key already defined at line 5 ` + key},
		{name: "a list as a key", in: secret + "stringData:\n  ? [S3cr3t]\n  : a\n",
			line: 1, msg: `Secret "s": invalid YAML: invalid map key: a list or a map cannot be a key ` + key},
		{name: "anchor containing itself", in: secret + "stringData:\n  S3cr3t: &S3cr3t [*S3cr3t]\n",
			line: 1, msg: `Secret "s": invalid YAML: an anchor's value contains itself ` + name},
		{name: "data not base64", in: secret + "data:\n  password: S3cr3t!\n",
			line: 5, field: "data[password]", msg: `Secret "s": must be base64 (put plain text under stringData instead; the value is withheld)`},
		{name: "data not base64 through an alias", in: secret + "data:\n  a: &x S3cr3t!\n  b: *x\n",
			line: 5, field: "data[a]", msg: `Secret "s": must be base64 (put plain text under stringData instead; the value is withheld)`},
		{name: "not JSON", in: secret + "stringData:\n  password: .nan\n",
			line: 1, msg: `Secret "s": cannot convert to JSON ` + whole},
		{name: "JSON decoding error", in: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  creationTimestamp: S3cr3t\n",
			line: 1, msg: `Secret "s": cannot decode ` + whole},
		{name: "Secret in a List", in: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n  stringData: {password: !!int S3cr3t}\n",
			line: 4, msg: `Secret "s": invalid YAML: cannot decode a !!str as a !!int ` + value},
		{name: "List item whose kind may come from a merge key", in: "apiVersion: v1\nkind: List\nitems:\n- <<: {apiVersion: v1, kind: Secret}\n  metadata: {name: s}\n  stringData: {password: !!int S3cr3t}\n",
			line: 4, field: "items[0]", msg: `invalid YAML: cannot decode a !!str as a !!int ` + value},
		{name: "ConfigMap", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  k: !!int S3cr3t\n",
			line: 1, msg: "ConfigMap \"c\": invalid YAML: cannot decode !!str `S3cr3t` as a !!int", keepsText: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Parse([]byte(tt.in), webOrigin, podspectest.Node)
			if len(res.Problems) == 0 {
				t.Fatal("no problem")
			}
			for _, p := range res.Problems {
				if !tt.keepsText && strings.Contains(p.Message+p.Field, "S3cr3t") {
					t.Errorf("problem quotes the Secret: %+v", p)
				}
			}
			p := res.Problems[0]
			if p.Line != tt.line || p.Field != tt.field || p.Message != tt.msg {
				t.Errorf("got line %d field %q %q\nwant line %d field %q %q", p.Line, p.Field, p.Message, tt.line, tt.field, tt.msg)
			}
		})
	}
}

// TestWithholdYAML covers the go-yaml messages one by one: those quoting
// input are rewritten without it, fixed ones are kept, and any other is
// withheld whole.
func TestWithholdYAML(t *testing.T) {
	tests := []struct{ in, want string }{
		{"invalid YAML: did not find expected key", "invalid YAML: did not find expected key"},
		{"invalid YAML: did not find expected ',' or ']'", "invalid YAML: did not find expected ',' or ']'"},
		{"invalid YAML: exceeded max depth of 10000", "invalid YAML: exceeded max depth of 10000"},
		{"invalid YAML: cannot unmarshal !!str `S3cr3t...` into int", "invalid YAML: cannot unmarshal a !!str into int (value withheld: it may be a Secret's value)"},
		{"invalid YAML: cannot unmarshal !!seq into map[string]interface {}", "invalid YAML: cannot unmarshal a !!seq into map[string]interface {} (value withheld: it may be a Secret's value)"},
		{"invalid YAML: mapping key \"S3cr3t\" already defined at line 7", "invalid YAML: mapping key already defined at line 7 (key withheld: it may be a Secret's value)"},
		{"invalid YAML: mapping key 12 already defined at line 7", "invalid YAML: mapping key already defined at line 7 (key withheld: it may be a Secret's value)"},
		{"invalid YAML: runtime error: hash of unhashable type S3cr3t", "invalid YAML (message withheld: it may quote a Secret's value)"},
		{"invalid YAML: S3cr3t", "invalid YAML (message withheld: it may quote a Secret's value)"},
	}
	for _, tt := range tests {
		if got := withholdYAML(tt.in); got != tt.want {
			t.Errorf("withholdYAML(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestAliasLine(t *testing.T) {
	tests := []struct {
		in   string
		name string
		want int
	}{
		{"a: *x\n", "x", 1},
		{"a: b*x\nc: [*x]\n", "x", 2},
		{"a: *xy\nb: *x", "x", 2},
		{"a: b\n", "x", 0},
	}
	for _, tt := range tests {
		if got := aliasLine([]byte(tt.in), tt.name); got != tt.want {
			t.Errorf("aliasLine(%q, %q) = %d, want %d", tt.in, tt.name, got, tt.want)
		}
	}
}

// TestParseHoldsSecret: what counts as a manifest holding a Secret, whose
// mode checkSecretFile checks: any Secret document or List item, valid or
// not, and a manifest whose parse stopped while it may hold one.
func TestParseHoldsSecret(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"pod", podspectest.Manifest("a", "img:1"), false},
		{"ConfigMap", podspectest.ConfigMap, false},
		{"Secret", podspectest.Secret, true},
		{"Secret beside a pod", podspectest.Manifest("a", "img:1") + "---\n" + podspectest.Secret, true},
		{"invalid Secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: A_b}\n", true},
		{"Secret in a List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n", true},
		{"Secret refused in a PodList", "apiVersion: v1\nkind: PodList\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n", true},
		{"syntax error after a Secret's kind", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: b\n", true},
		{"syntax error in a pod", podspectest.Manifest("a", "img:1") + "  - [\n", false},
	}
	for _, tt := range tests {
		if got := Parse([]byte(tt.in), webOrigin, podspectest.Node).secret; got != tt.want {
			t.Errorf("%s: holds a Secret %v, want %v", tt.name, got, tt.want)
		}
	}
}
