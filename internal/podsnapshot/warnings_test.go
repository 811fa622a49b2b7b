package podsnapshot

import (
	"reflect"
	"testing"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

// withPort adds a port to the single container of a podspectest.Manifest.
func withPort(manifest, port string) string {
	return manifest + "    ports:\n    - " + port + "\n"
}

// TestSnapshotWarnings: ignored fields of accepted pods are warnings at
// their lines; a host port an earlier pod of the source claims is a
// warning on the later pod naming the earlier one's file and line, and
// both pods run; a duplicate within a pod refuses it.
func TestSnapshotWarnings(t *testing.T) {
	hostNet := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: net\nspec:\n  hostNetwork: true\n  containers:\n  - name: main\n    image: nginx:1\n    ports:\n    - containerPort: 8080\n"
	tests := []struct {
		name      string
		files     map[string]string // in Merged order by name
		wantPods  int
		wantWarn  []string
		wantProbs []string
	}{
		{"ignored field", map[string]string{"a.yaml": podspectest.Manifest("web", "nginx:1") + "  nodeSelector:\n    disk: ssd\n"}, 1,
			[]string{"a.yaml:9: spec.nodeSelector: ignored: berth runs the pod on this node without scheduling"}, nil},
		{"clash across files", map[string]string{
			"a.yaml": withPort(podspectest.Manifest("a", "nginx:1"), "{containerPort: 80, hostPort: 8080}"),
			"b.yaml": withPort(podspectest.Manifest("b", "nginx:1"), "{containerPort: 80, hostPort: 8080}"),
		}, 2, []string{`b.yaml:10: spec.containers[0].ports[0].hostPort: hostPort TCP/0.0.0.0/8080 clashes with TCP/0.0.0.0/8080 of pod "a-n1" at a.yaml:10: both pods run, but only one can hold the port`}, nil},
		{"hostNetwork container port clashes with a hostPort", map[string]string{
			"a.yaml": withPort(podspectest.Manifest("a", "nginx:1"), "{containerPort: 80, hostPort: 8080, hostIP: 127.0.0.1}"),
			"b.yaml": hostNet,
		}, 2, []string{`b.yaml:11: spec.containers[0].ports[0].hostPort: hostPort TCP/0.0.0.0/8080 clashes with TCP/127.0.0.1/8080 of pod "a-n1" at a.yaml:10: both pods run, but only one can hold the port`}, nil},
		{"other protocol and address", map[string]string{
			"a.yaml": withPort(podspectest.Manifest("a", "nginx:1"), "{containerPort: 80, hostPort: 8080, hostIP: 127.0.0.1}"),
			"b.yaml": withPort(podspectest.Manifest("b", "nginx:1"), "{containerPort: 80, hostPort: 8080, hostIP: 127.0.0.2}"),
			"c.yaml": withPort(podspectest.Manifest("c", "nginx:1"), "{containerPort: 80, hostPort: 8080, protocol: UDP}"),
		}, 3, nil, nil},
		{"duplicate within a pod", map[string]string{
			"a.yaml": podspectest.Manifest("a", "nginx:1") + "    ports:\n    - {containerPort: 80, hostPort: 8080}\n  - name: side\n    image: nginx:1\n    ports:\n    - {containerPort: 81, hostPort: 8080}\n",
		}, 0, nil, []string{`a.yaml:14: spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var results []Merged
			for _, name := range []string{"a.yaml", "b.yaml", "c.yaml"} {
				if data, ok := tt.files[name]; ok {
					origin := podspec.Origin{Source: podspec.SourceFile, Path: name}
					results = append(results, Merged{Origin: origin, Result: podspec.Parse([]byte(data), origin, "n1")})
				}
			}
			snap := Assemble(podspec.SourceFile, results, false, nil, NewResolver(nil))
			if len(snap.Pods) != tt.wantPods {
				t.Errorf("%d pods run, want %d", len(snap.Pods), tt.wantPods)
			}
			if got := errorsOf(snap.Warnings); !reflect.DeepEqual(got, tt.wantWarn) {
				t.Errorf("warnings = %q, want %q", got, tt.wantWarn)
			}
			if got := errorsOf(snap.Problems); !reflect.DeepEqual(got, tt.wantProbs) {
				t.Errorf("problems = %q, want %q", got, tt.wantProbs)
			}
		})
	}
}

func errorsOf(ps []podspec.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Error())
	}
	return out
}
