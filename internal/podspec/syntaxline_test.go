package podspec

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestSyntaxErrorLine: a YAML syntax error names the line of the offending
// token. Each case also records what sigs.k8s.io/yaml (the kubelet's
// decoder) says, so the comparison stays checked: its parser errors are
// one line short, its scanner errors exact, and for a token left open it
// names the end of the file.
func TestSyntaxErrorLine(t *testing.T) {
	// Lines 1-8; line 8 is the container's image.
	const head = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: b01\nspec:\n  containers:\n  - name: main\n    image: busybox\n"
	tests := []struct {
		name    string
		in      string
		line    int    // the offending token's line
		sigs    int    // what sigs.k8s.io/yaml reports; 0: it accepts the input
		problem string // the message after "invalid YAML: "
	}{
		{
			name: "mis-indented key", in: head + "   command: [sh]\n",
			line: 9, sigs: 8, problem: "did not find expected key",
		},
		{
			name: "mis-indented key of a second list item", in: head + "  - name: side\n   image: busybox\n",
			line: 10, sigs: 9, problem: "did not find expected key",
		},
		{
			name: "key indented deeper than its siblings", in: head + "    imagePullPolicy: Never\n     command: [sh]\n",
			line: 10, sigs: 10, problem: "mapping values are not allowed in this context",
		},
		{
			name: "tab indentation", in: head + "\tcommand: [sh]\n",
			line: 9, sigs: 9, problem: "found a tab character that violates indentation",
		},
		{
			name: "unclosed quote", in: head + "    workingDir: \"/srv\n    args: [a]\nstatus: {}\n",
			line: 9, sigs: 12, problem: "found unexpected end of stream",
		},
		{
			name: "unclosed flow mapping", in: head + "    env: {name: a, value: b\n    args: [a]\n",
			line: 10, sigs: 9, problem: "did not find expected ',' or '}'",
		},
		{
			name: "bad flow mapping", in: head + "    resources: {limits: {cpu: 1}, requests: }}\n",
			line: 9, sigs: 8, problem: "did not find expected key",
		},
		{
			name: "duplicate key", in: head + "    image: other\n",
			line: 9, sigs: 0, problem: `mapping key "image" already defined at line 8`,
		},
		{
			name: "error on the first line", in: "kind: Pod: x\n",
			line: 1, sigs: 1, problem: "mapping values are not allowed in this context",
		},
		{
			name: "error in the second document", in: head + "---\n" + head + "   command: [sh]\n",
			// sigs.k8s.io/yaml reads the first document only.
			line: 18, sigs: 0, problem: "did not find expected key",
		},
		{
			name: "unclosed flow sequence at the end", in: "apiVersion: v1\nkind: Pod\nmetadata: [\n\n",
			line: 3, sigs: 4, problem: "did not find expected node content",
		},
	}
	sigsLine := regexp.MustCompile(`yaml: (?:line (\d+): )?`)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Parse([]byte(tc.in), webOrigin, podspectest.Node)
			if len(res.Problems) != 1 {
				t.Fatalf("problems %v, want one", res.Problems)
			}
			p := res.Problems[0]
			if p.Line != tc.line || p.Message != "invalid YAML: "+tc.problem {
				t.Errorf("got line %d %q, want line %d %q", p.Line, p.Message, tc.line, tc.problem)
			}

			var v any
			err := sigsyaml.Unmarshal([]byte(tc.in), &v)
			got := 0
			if err != nil {
				m := sigsLine.FindStringSubmatch(err.Error())
				got = 1 // no line: its mark is on the first line
				if m != nil && m[1] != "" {
					got, _ = strconv.Atoi(m[1])
				}
			}
			if got != tc.sigs {
				t.Errorf("sigs.k8s.io/yaml: %v (line %d), the table says line %d", err, got, tc.sigs)
			}
		})
	}
}

// TestSplitV2Error covers the shapes of go-yaml v2 errors.
func TestSplitV2Error(t *testing.T) {
	tests := []struct {
		in      string
		line    int
		problem string
	}{
		{"yaml: line 8: did not find expected key", 8, "did not find expected key"},
		{"yaml: mapping values are not allowed in this context", 0, "mapping values are not allowed in this context"},
		{"yaml: line x: odd", 0, "line x: odd"},
		{"document contains excessive aliasing", -1, ""},
	}
	for _, tc := range tests {
		line, problem := splitV2Error(tc.in)
		if line != tc.line || problem != tc.problem {
			t.Errorf("splitV2Error(%q) = %d %q, want %d %q", tc.in, line, problem, tc.line, tc.problem)
		}
	}
}
