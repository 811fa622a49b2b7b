package podspec

import (
	"bytes"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The decoders' messages quote the text they stumbled on: go-yaml names
// the anchor of an alias ("unknown anchor 'S3cr3t' referenced", which is
// what an unquoted password starting with "*" gives), the value of a
// tagged scalar, a duplicate key; JSON decoding quotes a timestamp that
// does not parse or a float that is no JSON. In a Secret that text is
// likely a secret value, and a problem reaches `berth validate`, the log
// and /problems. So the decoding problems of what may be a Secret keep
// their line and what went wrong, never the text: withholdYAML rewrites
// the go-yaml messages known to quote, keeps those known not to, and
// replaces any other whole, as withheld does the JSON decoder's.

// withheldNote says why a name, key or value is left out of a message;
// withheldWhole why a whole message is.
const (
	withheldNote  = "it may be a Secret's value"
	withheldWhole = "it may quote a Secret's value"
)

// yamlQuoting are the go-yaml problems that quote input, each with its
// rewrite without the quoted text. The tags kept are go-yaml's own
// (!!int, !!str), the types Go's.
var yamlQuoting = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`^unknown anchor '.*' referenced$`),
		`an alias refers to an unknown anchor; a value starting with "*" is read as an alias and must be quoted (name withheld: ` + withheldNote + `)`},
	{regexp.MustCompile(`^anchor '.*' value contains itself$`), "an anchor's value contains itself (name withheld: " + withheldNote + ")"},
	{regexp.MustCompile("^cannot decode (!![a-z]+) `.*` as a (!![a-z]+)$"), "cannot decode a $1 as a $2 (value withheld: " + withheldNote + ")"},
	{regexp.MustCompile("^cannot unmarshal (!![a-z]+)(?: `.*`)? into ([\\[\\]a-zA-Z0-9_.{}* ]+)$"), "cannot unmarshal a $1 into $2 (value withheld: " + withheldNote + ")"},
	{regexp.MustCompile(`^mapping key .* already defined at line (\d+)$`), "mapping key already defined at line $1 (key withheld: " + withheldNote + ")"},
	{regexp.MustCompile(`^invalid map key: .*$`), "invalid map key: a list or a map cannot be a key (key withheld: " + withheldNote + ")"},
	{regexp.MustCompile(`^exceeded max depth of \d+$`), "$0"},
}

// yamlFixed are the go-yaml problems that quote nothing: those of its
// reader, scanner and parser, and of its decoder without arguments.
var yamlFixed = map[string]bool{
	"!!binary value contains invalid base64 data":                  true,
	"attempted to go past the end of stream; corrupted value?":     true,
	"block sequence entries are not allowed in this context":       true,
	"control characters are not allowed":                           true,
	"could not find expected ':'":                                  true,
	"could not find expected directive name":                       true,
	"did not find URI escaped octet":                               true,
	"did not find expected '!'":                                    true,
	"did not find expected ',' or ']'":                             true,
	"did not find expected ',' or '}'":                             true,
	"did not find expected '-' indicator":                          true,
	"did not find expected <document start>":                       true,
	"did not find expected <stream-start>":                         true,
	"did not find expected alphabetic or numeric character":        true,
	"did not find expected comment or line break":                  true,
	"did not find expected digit or '.' character":                 true,
	"did not find expected hexdecimal number":                      true,
	"did not find expected key":                                    true,
	"did not find expected node content":                           true,
	"did not find expected tag URI":                                true,
	"did not find expected version number":                         true,
	"did not find expected whitespace or line break":               true,
	"did not find expected whitespace":                             true,
	"did not find the expected '>'":                                true,
	"document contains excessive aliasing":                         true,
	"expected low surrogate area":                                  true,
	"found a tab character that violates indentation":              true,
	"found a tab character where an indentation space is expected": true,
	"found an incorrect leading UTF-8 octet":                       true,
	"found an incorrect trailing UTF-8 octet":                      true,
	"found an indentation indicator equal to 0":                    true,
	"found character that cannot start any token":                  true,
	"found duplicate %TAG directive":                               true,
	"found duplicate %YAML directive":                              true,
	"found extremely long version number":                          true,
	"found incompatible YAML document":                             true,
	"found invalid Unicode character escape code":                  true,
	"found undefined tag handle":                                   true,
	"found unexpected document indicator":                          true,
	problemEndOfStream:                                             true,
	"found unexpected non-alphabetical character":                  true,
	"found unknown directive name":                                 true,
	"found unknown escape character":                               true,
	"incomplete UTF-16 character":                                  true,
	"incomplete UTF-16 surrogate pair":                             true,
	"incomplete UTF-8 octet sequence":                              true,
	"invalid Unicode character":                                    true,
	"invalid leading UTF-8 octet":                                  true,
	"invalid length of a UTF-8 sequence":                           true,
	"invalid trailing UTF-8 octet":                                 true,
	"map merge requires map or sequence of maps as the value":      true,
	"mapping keys are not allowed in this context":                 true,
	"mapping values are not allowed in this context":               true,
	"unexpected low surrogate area":                                true,
	"unknown problem parsing YAML content":                         true,
}

// yamlPrefix starts every message yamlErrorLine returns.
const yamlPrefix = "invalid YAML: "

// withholdYAML is a message of yamlErrorLine as the problem of what may be
// a Secret shows it.
func withholdYAML(msg string) string {
	problem := strings.TrimPrefix(msg, yamlPrefix)
	for _, q := range yamlQuoting {
		if q.re.MatchString(problem) {
			return yamlPrefix + q.re.ReplaceAllString(problem, q.with)
		}
	}
	if yamlFixed[problem] {
		return yamlPrefix + problem
	}
	return "invalid YAML (message withheld: " + withheldWhole + ")"
}

// withheld replaces a message of the JSON stage of decoding (after the
// YAML parsed) for what may be a Secret: what replaces it says which step
// failed.
func withheld(step string) string {
	return step + " (message withheld: " + withheldWhole + ")"
}

// mightHoldSecret reports whether a manifest whose parse failed may hold
// a Secret: once the parser gave up, the kind of the failing document is
// unknown, so it may unless nothing in the manifest can name the kind
// Secret. A kind is either written out ("Secret", plain or quoted, or in
// an anchor an alias refers to) or spelled with the escapes of a
// double-quoted scalar ("\x53ecret", or split by an escaped line break),
// which need a backslash; YAML's other foldings insert a space.
func mightHoldSecret(data []byte) bool {
	return bytes.Contains(data, []byte(KindSecret)) || bytes.IndexByte(data, '\\') >= 0
}

// mightBeSecret reports whether a decoded document or list item may be a
// Secret: its kind says so, or it has no kind of its own and a merge key
// ("<<") may give it one.
func mightBeSecret(node *yaml.Node) bool {
	if _, k := child(node, pathSegment{key: "kind"}); k != nil {
		return scalarAt(node, "kind") == KindSecret
	}
	_, merge := child(node, pathSegment{key: "<<"})
	return merge != nil
}
