package podsnapshot

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

func TestKeepLastGood(t *testing.T) {
	two := "---\n" + podspectest.Manifest("a", "img:1") + "---\n" + podspectest.Manifest("b", "img:1")
	prev := podspec.Parse([]byte(two), webOrigin, podspectest.Node)
	tests := []struct {
		name string
		in   string
		want string // images of the kept pods, in order
	}{
		{"all good replaces", "---\n" + podspectest.Manifest("a", "img:2") + "---\n" + podspectest.Manifest("b", "img:2"), "a:img:2 b:img:2"},
		{"a pod dropped from the file goes", podspectest.Manifest("a", "img:2"), "a:img:2"},
		{"named rejection keeps that pod only", "---\n" + podspectest.Manifest("a", "img:2") + "---\n" + podspectest.Manifest("b", ""), "a:img:2 b:img:1"},
		{"named rejection of the other pod", podspectest.Manifest("b", ""), "b:img:1"},
		{"syntax error keeps everything", "a: [", "a:img:1 b:img:1"},
		{"empty file keeps everything", "", "a:img:1 b:img:1"},
		{"nameless rejection keeps what has no new version", "---\n" + podspectest.Manifest("a", "img:2") + "---\n" + podspectest.Manifest("", "img:2"), "a:img:2 b:img:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := KeepLastGood(prev, podspec.Parse([]byte(tt.in), webOrigin, podspectest.Node))
			var got []string
			for i, p := range res.Pods {
				got = append(got, strings.TrimSuffix(p.Name, "-"+podspectest.Node)+":"+p.Spec.Containers[0].Image)
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
	origin := func(name string) podspec.Origin {
		return podspec.Origin{Source: podspec.SourceFile, Path: "/m/" + name}
	}
	parse := func(name, in string) Merged {
		return Merged{Origin: origin(name), Result: podspec.Parse([]byte(in), origin(name), podspectest.Node)}
	}
	withUID := func(name, uid string) string {
		return strings.Replace(podspectest.Manifest(name, "img:1"), "  name: "+name+"\n", "  name: "+name+"\n  uid: "+uid+"\n", 1)
	}
	snap := Assemble(podspec.SourceFile, []Merged{
		parse("a.yaml", podspectest.Manifest("web", "img:1")+"---\n"+podspectest.Manifest("web", "img:2")),
		parse("b.yaml", podspectest.Manifest("web", "img:3")),
		parse("c.yaml", withUID("x", "same")),
		parse("d.yaml", withUID("y", "same")),
	}, false, nil, &Resolver{})
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

// TestKeepLegacyUIDs: a pod keeps its plain-hash UID only when the
// manifest's previous version has it; a pod with an explicit UID, or
// parsed without a key, is left as parsed.
func TestKeepLegacyUIDs(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	parseKeyed := func(in string) podspec.Result {
		return podspec.ParseKeyed([]byte(in), webOrigin, podspectest.Node, 0, key)
	}
	plain := func(in string) types.UID { return podspec.Parse([]byte(in), webOrigin, podspectest.Node).Pods[0].UID }
	a, b := podspectest.Manifest("web", "nginx:1"), podspectest.Manifest("web", "nginx:2")
	explicit := strings.Replace(a, "  name: web\n", "  name: web\n  uid: fixed\n", 1)
	tests := []struct {
		name      string
		prev, cur podspec.Result
		want      types.UID
	}{
		{name: "previous version has the plain UID", prev: podspec.Parse([]byte(a), webOrigin, podspectest.Node), cur: parseKeyed(a), want: plain(a)},
		{name: "previous version is keyed", prev: parseKeyed(a), cur: parseKeyed(a), want: parseKeyed(a).Pods[0].UID},
		{name: "edited", prev: podspec.Parse([]byte(a), webOrigin, podspectest.Node), cur: parseKeyed(b), want: parseKeyed(b).Pods[0].UID},
		{name: "no previous version", cur: parseKeyed(a), want: parseKeyed(a).Pods[0].UID},
		{name: "explicit UID", prev: podspec.Parse([]byte(explicit), webOrigin, podspectest.Node), cur: parseKeyed(explicit), want: "fixed"},
		{name: "no key", prev: parseKeyed(a), cur: podspec.Parse([]byte(a), webOrigin, podspectest.Node), want: plain(a)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := KeepLastGood(tt.prev, tt.cur).Pods[0]
			if got.UID != tt.want || got.Annotations[podspec.AnnotationHash] != string(tt.want) {
				t.Errorf("UID %s (%s %s), want %s", got.UID, podspec.AnnotationHash, got.Annotations[podspec.AnnotationHash], tt.want)
			}
		})
	}
	if k, p := parseKeyed(a).Pods[0].UID, plain(a); k == p {
		t.Errorf("the keyed UID is the plain hash %s", p)
	}
}
