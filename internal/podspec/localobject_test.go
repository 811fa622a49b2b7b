package podspec

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

// objectKeys renders n keys PREFIX0..PREFIXn-1 of a data map, each with
// value v.
func objectKeys(prefix, v string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  %s%d: %s\n", prefix, i, v)
	}
	return b.String()
}

// problemLines renders problems as "LINE FIELD REASON" for comparison.
func problemLines(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d %s %s", p.Line, p.Field, p.Reason))
	}
	return out
}

func TestParseObjects(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantObjs  int
		wantProbs []string
		wantMsg   string // in the first problem
	}{
		{name: "a ConfigMap and a Secret beside a pod", in: podspectest.ConfigMap + "---\n" + podspectest.Secret + "---\n" + podspectest.Manifest("web", "img:1"), wantObjs: 2},
		{name: "in a List", in: `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a}
  data: {k: v}
- apiVersion: v1
  kind: Pod
  metadata: {name: p}
  spec:
    containers: [{name: c, image: i}]
`, wantObjs: 1},
		{name: "not in a PodList", in: "apiVersion: v1\nkind: PodList\nitems:\n- kind: ConfigMap\n  metadata: {name: a}\n",
			wantProbs: []string{"4 items[0].kind DecodeError"}},
		{name: "unknown field", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndatta: {k: v}\n",
			wantProbs: []string{"4 datta DecodeError"}, wantMsg: `ConfigMap "a": unknown field`},
		{name: "bad base64 never quoted", in: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n  k: not*base64\n",
			wantProbs: []string{"5 data[k] DecodeError"}, wantMsg: "must be base64"},
		{name: "bad key", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {'a/b': v}\n",
			wantProbs: []string{"4 data[a/b] Invalid"}},
		{name: "key in data and binaryData", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\nbinaryData: {k: AA==}\n",
			wantProbs: []string{"5 binaryData[k] Invalid"}},
		{name: "bad name", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: A_b}\n",
			wantProbs: []string{"3 metadata.name Invalid"}},
		{name: "no name", in: "apiVersion: v1\nkind: Secret\nmetadata: {}\n",
			wantProbs: []string{"3 metadata.name Invalid"}},
		{name: "dockerconfigjson without its key", in: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/dockerconfigjson\n",
			wantProbs: []string{"1 data[.dockerconfigjson] Invalid"}},
		{name: "dockerconfigjson not JSON, contents never quoted", in: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: 'topsecret{'\n",
			wantProbs: []string{"1 data[.dockerconfigjson] Invalid"}, wantMsg: "must be a JSON object"},
		{name: "tls needs both keys", in: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/tls\ndata: {tls.crt: AA==}\n",
			wantProbs: []string{"5 data[tls.key] Invalid"}},
		{name: "service-account token", in: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/service-account-token\n",
			wantProbs: []string{"4 type Unsupported"}},
		{name: "too large", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  k: " + strings.Repeat("x", maxObjectSize+1) + "\n",
			wantProbs: []string{"4 data Invalid"}},
		{name: "as many keys as allowed", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n" + objectKeys("k", "v", maxObjectKeys),
			wantObjs: 1},
		{name: "too many keys", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n" + objectKeys("k", "v", maxObjectKeys+1),
			wantProbs: []string{"4 data Invalid"}, wantMsg: `ConfigMap "a": Forbidden: 1001 keys, more than the 1000 a ConfigMap or Secret may hold`},
		{name: "too many keys, most in binaryData", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: b}\nbinaryData:\n" + objectKeys("k", "AA==", maxObjectKeys),
			wantProbs: []string{"5 binaryData Invalid"}},
		{name: "too many keys in data and stringData together", in: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n" + objectKeys("d", "AA==", 10) +
			"stringData:\n" + objectKeys("s", "v", maxObjectKeys-9),
			wantProbs: []string{"15 stringData Invalid"}, wantMsg: `Secret "s": Forbidden: 1001 keys`},
		{name: "a key in data and stringData counts once", in: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n" + objectKeys("k", "AA==", 10) +
			"stringData:\n" + objectKeys("k", "v", maxObjectKeys),
			wantObjs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Parse([]byte(tt.in), webOrigin, podspectest.Node)
			if len(res.Objects) != tt.wantObjs {
				t.Errorf("%d objects, want %d", len(res.Objects), tt.wantObjs)
			}
			got := problemLines(res.Problems)
			if strings.Join(got, "\n") != strings.Join(tt.wantProbs, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s\nfull: %v", strings.Join(got, "\n"), strings.Join(tt.wantProbs, "\n"), res.Problems)
			}
			for _, p := range res.Problems {
				if p.Name != "" {
					t.Errorf("an object's problem names a pod %q: it would show in /pods as a rejected pod", p.Name)
				}
				if strings.Contains(p.Message, "topsecret") || strings.Contains(p.Message, "not*base64") {
					t.Errorf("problem quotes a Secret's contents: %s", p.Message)
				}
			}
			if tt.wantMsg != "" && (len(res.Problems) == 0 || !strings.Contains(res.Problems[0].Message, tt.wantMsg)) {
				t.Errorf("problems %v, want the first to say %q", res.Problems, tt.wantMsg)
			}
		})
	}
}

func TestParseObjectDefaults(t *testing.T) {
	res := Parse([]byte(podspectest.Secret+"---\n"+podspectest.ConfigMap), webOrigin, podspectest.Node)
	if len(res.Objects) != 2 {
		t.Fatalf("objects %+v, problems %v", res.Objects, res.Problems)
	}
	s := res.Objects[0].Secret
	if s.Namespace != "default" || s.Type != v1.SecretTypeOpaque || s.StringData != nil ||
		string(s.Data["password"]) != "hunter2" || string(s.Data["user"]) != "app" {
		t.Errorf("secret not defaulted as the API server stores it: %+v", s)
	}
	if res.Objects[0].Line != 1 || res.Objects[1].Line != 10 {
		t.Errorf("lines %d, %d; want 1, 10", res.Objects[0].Line, res.Objects[1].Line)
	}
}
