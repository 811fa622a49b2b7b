package podspec

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
)

// problemEndOfStream is the syntax error of a token (a quoted scalar, a
// flow collection) still open at the end of the input.
const problemEndOfStream = "found unexpected end of stream"

// SyntaxLine returns the line of the token a YAML syntax error is about
// (the config file reader uses it too).
// The decoder berth uses (go-yaml v3) names the line where the parser lost
// context: for a mis-indented key on line 9, the line of the mapping it
// was parsing, several lines up. go-yaml v2, under sigs.k8s.io/yaml and so
// under the kubelet, names the offending token, but off by one for parser
// errors (its marks are 0-based and only scanner errors add 1), so the
// kubelet says line 8. This parses the same input with v2 up to its syntax
// error and, when v2 stopped on the same problem, corrects its line;
// otherwise v3's line stands. An unclosed token is the exception: the end
// of the input says nothing, and v3's line is where the token opened.
//
// v3line and problem are what v3 reported; data is the whole input (v2
// reports lines of the whole stream, as v3 does).
func SyntaxLine(data []byte, v3line int, problem string) int {
	if problem == problemEndOfStream {
		return v3line
	}
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	for {
		// An empty struct accepts any mapping; other shapes are type
		// errors, which are no syntax errors and are skipped.
		var doc struct{}
		err := dec.Decode(&doc)
		var te *yamlv2.TypeError
		switch {
		case err == nil || errors.As(err, &te):
			continue
		case errors.Is(err, io.EOF):
			return v3line // v2 found no syntax error
		}
		line, v2problem := splitV2Error(err.Error())
		if v2problem != problem || line < 0 {
			return v3line
		}
		if !v2ScannerProblems[v2problem] && !strings.HasPrefix(v2problem, "exceeded max depth of ") {
			line++ // a parser error: v2 printed the 0-based line
		}
		// v2 leaves the line out when its mark is on the first line. A
		// parser error at the end of the input (an unclosed flow
		// collection, a key without its value) marks the line after the
		// last: the last line that holds anything is where to look.
		last := bytes.Count(bytes.TrimRight(data, " \t\r\n"), []byte("\n")) + 1
		return min(max(line, 1), last)
	}
}

// splitV2Error parses "yaml: line 8: did not find expected key" into 8 and
// the problem; 0 when v2 gave no line, -1 when the text is not of that form.
func splitV2Error(msg string) (int, string) {
	rest, ok := strings.CutPrefix(msg, "yaml: ")
	if !ok {
		return -1, ""
	}
	where, problem, ok := strings.Cut(rest, ": ")
	if !ok || !strings.HasPrefix(where, "line ") {
		return 0, rest
	}
	n, err := strconv.Atoi(strings.TrimPrefix(where, "line "))
	if err != nil {
		return 0, rest
	}
	return n, problem
}

// v2ScannerProblems are the problems go-yaml v2's scanner reports (its
// scannerc.go); their lines are already 1-based. Every other syntax
// problem comes from its parser, whose lines are 0-based.
var v2ScannerProblems = map[string]bool{
	"block sequence entries are not allowed in this context":       true,
	"could not find expected ':'":                                  true,
	"could not find expected directive name":                       true,
	"did not find URI escaped octet":                               true,
	"did not find expected '!'":                                    true,
	"did not find expected alphabetic or numeric character":        true,
	"did not find expected comment or line break":                  true,
	"did not find expected digit or '.' character":                 true,
	"did not find expected hexdecimal number":                      true,
	"did not find expected tag URI":                                true,
	"did not find expected version number":                         true,
	"did not find expected whitespace":                             true,
	"did not find expected whitespace or line break":               true,
	"did not find the expected '>'":                                true,
	"found a tab character that violates indentation":              true,
	"found a tab character where an indentation space is expected": true,
	"found an incorrect leading UTF-8 octet":                       true,
	"found an incorrect trailing UTF-8 octet":                      true,
	"found an indentation indicator equal to 0":                    true,
	"found character that cannot start any token":                  true,
	"found extremely long version number":                          true,
	"found invalid Unicode character escape code":                  true,
	"found unexpected document indicator":                          true,
	problemEndOfStream:                                             true,
	"found unexpected non-alphabetical character":                  true,
	"found unknown directive name":                                 true,
	"found unknown escape character":                               true,
	"mapping keys are not allowed in this context":                 true,
	"mapping values are not allowed in this context":               true,
}
