package manifest

import (
	"fmt"
	"strings"
	"testing"
)

func TestKeepLastGood(t *testing.T) {
	two := "---\n" + podManifest("a", "img:1") + "---\n" + podManifest("b", "img:1")
	prev := Parse([]byte(two), webOrigin, testNode)
	tests := []struct {
		name string
		in   string
		want string // images of the kept pods, in order
	}{
		{"all good replaces", "---\n" + podManifest("a", "img:2") + "---\n" + podManifest("b", "img:2"), "a:img:2 b:img:2"},
		{"a pod dropped from the file goes", podManifest("a", "img:2"), "a:img:2"},
		{"named rejection keeps that pod only", "---\n" + podManifest("a", "img:2") + "---\n" + podManifest("b", ""), "a:img:2 b:img:1"},
		{"named rejection of the other pod", podManifest("b", ""), "b:img:1"},
		{"syntax error keeps everything", "a: [", "a:img:1 b:img:1"},
		{"empty file keeps everything", "", "a:img:1 b:img:1"},
		{"nameless rejection keeps what has no new version", "---\n" + podManifest("a", "img:2") + "---\n" + podManifest("", "img:2"), "a:img:2 b:img:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := keepLastGood(prev, Parse([]byte(tt.in), webOrigin, testNode))
			var got []string
			for i, p := range res.Pods {
				got = append(got, strings.TrimSuffix(p.Name, "-"+testNode)+":"+p.Spec.Containers[0].Image)
				if res.Lines[i] == 0 {
					t.Errorf("pod %s lost its line", p.Name)
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("kept %q, want %q", strings.Join(got, " "), tt.want)
			}
			for _, p := range res.Problems {
				if !strings.Contains(p.Message, "keep") {
					t.Errorf("problem %q does not say what keeps running", p.Message)
				}
			}
		})
	}
}

func TestAssembleDuplicates(t *testing.T) {
	origin := func(name string) Origin { return Origin{Source: SourceFile, Path: "/m/" + name} }
	parse := func(name, in string) merged {
		return merged{origin: origin(name), res: Parse([]byte(in), origin(name), testNode)}
	}
	withUID := func(name, uid string) string {
		return strings.Replace(podManifest(name, "img:1"), "  name: "+name+"\n", "  name: "+name+"\n  uid: "+uid+"\n", 1)
	}
	snap := assemble(SourceFile, []merged{
		parse("a.yaml", podManifest("web", "img:1")+"---\n"+podManifest("web", "img:2")),
		parse("b.yaml", podManifest("web", "img:3")),
		parse("c.yaml", withUID("x", "same")),
		parse("d.yaml", withUID("y", "same")),
	}, false, nil, &resolver{})
	var pods, probs []string
	for _, p := range snap.Pods {
		pods = append(pods, p.Name+":"+p.Spec.Containers[0].Image)
	}
	for _, p := range snap.Problems {
		probs = append(probs, fmt.Sprintf("%s:%d %s %s", p.Origin, p.Line, p.Reason, p.Name))
	}
	if want := "web-node1:img:1 x-node1:img:1"; strings.Join(pods, " ") != want {
		t.Errorf("pods %q, want %q", strings.Join(pods, " "), want)
	}
	want := []string{
		"/m/a.yaml:13 DuplicateName web-node1",
		"/m/b.yaml:4 DuplicateName web-node1",
		"/m/d.yaml:4 DuplicateUID y-node1",
	}
	if strings.Join(probs, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems\n%s\nwant\n%s", strings.Join(probs, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(snap.Problems[1].Message, "/m/a.yaml:4") {
		t.Errorf("duplicate problem does not name the first definition: %s", snap.Problems[1].Message)
	}
}
