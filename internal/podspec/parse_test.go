package podspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

var webOrigin = Origin{Source: SourceFile, Path: "/etc/kubernetes/manifests/web.yaml"}

// parseCases feed the table test and seed the fuzz corpus.
var parseCases = []struct {
	name      string
	in        string
	wantPods  []string // name_namespace of accepted pods
	wantProbs []string // "line field reason" of each problem
	wantMsg   string   // a substring of the first problem's Error()
}{
	{
		name: "kubelet example: pod without namespace",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: static-web
  labels:
    role: myrole
spec:
  containers:
    - name: web
      image: nginx
      ports:
        - name: web
          containerPort: 80
          protocol: TCP
`,
		wantPods: []string{"static-web-node1_default"},
	},
	{
		name: "kubelet example: pod with a uid and a namespace",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: test
  uid: "12345"
  namespace: kube-system
spec:
  containers:
  - name: image
    image: "registry.k8s.io/pause:3.10"
`,
		wantPods: []string{"test-node1_kube-system"},
	},
	{
		name: "kubelet example: PodList",
		in: `apiVersion: v1
kind: PodList
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: one
  spec:
    containers:
    - name: c
      image: busybox
- metadata:
    name: two
    namespace: ns2
  spec:
    containers:
    - name: c
      image: busybox
`,
		wantPods: []string{"one-node1_default", "two-node1_ns2"},
	},
	{
		name:     "multi-document stream with empty documents",
		in:       "---\n" + podspectest.Manifest("a", "img:1") + "---\n---\n" + podspectest.Manifest("b", "img:1") + "---\n",
		wantPods: []string{"a-node1_default", "b-node1_default"},
	},
	{
		name: "JSON with tabs",
		in: "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"Pod\",\n\t\"metadata\": {\"name\": \"j\"},\n" +
			"\t\"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"x:1\"}]}\n}\n",
		wantPods: []string{"j-node1_default"},
	},
	{
		name: "issue example: unsupported pull policy",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
    image: nginx:1
    imagePullPolicy: Sometimes
`,
		wantProbs: []string{"9 spec.containers[0].imagePullPolicy Invalid"},
		wantMsg:   `web.yaml:9: spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"`,
	},
	{
		name: "unknown field",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
    image: nginx:1
    imagePolicy: Always
`,
		wantProbs: []string{"9 spec.containers[0].imagePolicy DecodeError"},
		wantMsg:   "unknown field",
	},
	{
		name: "wrong type deep in a list",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: a
    image: nginx:1
  - name: b
    image: nginx:1
    ports:
    - containerPort: 80
    - containerPort: eighty
`,
		wantProbs: []string{"13 spec.containers[1].ports[1].containerPort DecodeError"},
		wantMsg:   "wrong type: got a string, want an integer",
	},
	{
		name:      "wrong type inside an inlined struct",
		in:        podspectest.Manifest("web", "nginx:1") + "    livenessProbe:\n      exec:\n        command: [true]\n",
		wantProbs: []string{"11 spec.containers[0].livenessProbe.exec.command[0] DecodeError"},
		wantMsg:   "got a boolean, want a string",
	},
	{
		name:      "duplicate key",
		in:        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n",
		wantProbs: []string{"5  DecodeError"},
		wantMsg:   `mapping key "name" already defined at line 4`,
	},
	{
		name:      "syntax error",
		in:        "apiVersion: v1\nkind: Pod\nmetadata: [\n",
		wantProbs: []string{"3  DecodeError"},
	},
	{
		name:      "bad quantity",
		in:        podspectest.Manifest("web", "nginx:1") + "    resources:\n      limits:\n        memory: 1Gb\n",
		wantProbs: []string{"11 spec.containers[0].resources.limits[memory] DecodeError"},
		wantMsg:   `invalid quantity "1Gb"`,
	},
	{
		name:      "a kind berth does not run",
		in:        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n",
		wantProbs: []string{"2 kind DecodeError"},
		wantMsg:   "berth runs Pods (and PodLists, ConfigMaps, Secrets); Deployment is not run: use a Pod",
	},
	{
		name:      "a kind berth reads in another version",
		in:        "apiVersion: v2\nkind: Pod\nmetadata:\n  name: d\n",
		wantProbs: []string{"1 apiVersion DecodeError"},
		wantMsg:   `must be "v1", got "v2"`,
	},
	{
		name:      "no kind",
		in:        "apiVersion: v1\nmetadata:\n  name: web\n",
		wantProbs: []string{"1  DecodeError"},
		wantMsg:   "apiVersion and kind are required",
	},
	{
		name:      "not an object",
		in:        "- a\n- b\n",
		wantProbs: []string{"1  DecodeError"},
	},
	{
		name:      "empty",
		in:        "# nothing here\n",
		wantProbs: []string{"1  Empty"},
	},
	{
		name: "validation errors point at their lines",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: Web
spec:
  restartPolicy: Sometimes
  initContainers:
  - name: c
    image: busybox
  containers:
  - name: c
    image: ""
    ports:
    - containerPort: 70000
      protocol: ICMP
    volumeMounts:
    - name: data
      mountPath: /data
    livenessProbe:
      exec:
        command: ["true"]
      tcpSocket:
        port: 80
    readinessProbe:
      periodSeconds: 5
`,
		wantProbs: []string{
			"4 metadata.name Invalid",
			"6 spec.restartPolicy Invalid",
			"11 spec.containers[0].name Invalid",
			"12 spec.containers[0].image Invalid",
			"14 spec.containers[0].ports[0].containerPort Invalid",
			"15 spec.containers[0].ports[0].protocol Invalid",
			"17 spec.containers[0].volumeMounts[0].name Invalid",
			"22 spec.containers[0].livenessProbe.tcpSocket Invalid",
			"24 spec.containers[0].readinessProbe Invalid",
		},
	},
	{
		name: "container restart rules (KEP-5307, KEP-5532)",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: job
spec:
  restartPolicy: Never
  initContainers:
  - name: fetch
    image: busybox
    restartPolicy: OnFailure
  - name: proxy
    image: busybox
    restartPolicy: Always
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [88]}
  containers:
  - name: work
    image: busybox
    restartPolicy: Never
    restartPolicyRules:
    - action: Restart
      exitCodes: {operator: In, values: [42]}
    - action: RestartAllContainers
      exitCodes: {operator: NotIn, values: [0, 1]}
`,
		wantPods: []string{"job-node1_default"},
	},
	{
		name: "container restart rules point at their lines",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: job
spec:
  initContainers:
  - name: fetch
    image: busybox
    restartPolicyRules:
    - action: Restart
      exitCodes: {operator: In, values: [1]}
  containers:
  - name: work
    image: busybox
    restartPolicy: Sometimes
    restartPolicyRules:
    - action: Reboot
      exitCodes:
        operator: Maybe
    - action: Restart
`,
		wantProbs: []string{
			"7 spec.initContainers[0].restartPolicy Invalid",
			"15 spec.containers[0].restartPolicy Invalid",
			"17 spec.containers[0].restartPolicyRules[0].action Invalid",
			"19 spec.containers[0].restartPolicyRules[0].exitCodes.operator Invalid",
			"20 spec.containers[0].restartPolicyRules[1].exitCodes Invalid",
		},
	},
	{
		name: "stop signals (KEP-4960) need spec.os.name and a signal of that OS",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  os: {name: linux}
  containers:
  - name: a
    image: busybox
    lifecycle:
      stopSignal: SIGRTMIN+3
  - name: b
    image: busybox
    lifecycle:
      stopSignal: SIGWHATEVER
`,
		wantProbs: []string{"15 spec.containers[1].lifecycle.stopSignal Invalid"},
		wantMsg:   `Unsupported value: "SIGWHATEVER"`,
	},
	{
		name: "a stop signal without spec.os.name",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: a
    image: busybox
    lifecycle:
      stopSignal: SIGUSR1
`,
		wantProbs: []string{"10 spec.containers[0].lifecycle.stopSignal Invalid"},
		wantMsg:   "may not be set for containers with empty `spec.os.name`",
	},
	{
		name: "windows knows SIGTERM and SIGKILL only",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  os: {name: windows}
  containers:
  - name: a
    image: busybox
    lifecycle:
      stopSignal: SIGUSR1
`,
		wantProbs: []string{"11 spec.containers[0].lifecycle.stopSignal Invalid"},
		wantMsg:   `supported values: "SIGKILL", "SIGTERM"`,
	},
	{
		name: "sleep hooks: zero seconds (KEP-4818) up to the grace period (KEP-3960)",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: a
    image: busybox
    lifecycle:
      postStart:
        sleep: {seconds: 0}
      preStop:
        sleep: {seconds: 10}
  - name: b
    image: busybox
    lifecycle:
      preStop:
        sleep: {seconds: 11}
  - name: c
    image: busybox
    lifecycle:
      postStart:
        sleep: {seconds: -1}
`,
		wantProbs: []string{
			"19 spec.containers[1].lifecycle.preStop.sleep Invalid",
			"24 spec.containers[2].lifecycle.postStart.sleep Invalid",
		},
		wantMsg: "must be non-negative and less than terminationGracePeriodSeconds (10)",
	},
	{
		name: "a pod's crash-loop ceiling",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations:
    berth.io/crashloop-backoff-max: 30s
spec:
  containers:
  - name: a
    image: busybox
`,
		wantPods: []string{"web-node1_default"},
	},
	{
		name: "a crash-loop ceiling that is no duration",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations:
    berth.io/crashloop-backoff-max: soon
spec:
  containers:
  - name: a
    image: busybox
`,
		wantProbs: []string{"6 metadata.annotations[berth.io/crashloop-backoff-max] Invalid"},
		wantMsg:   "must be a duration such as 30s or 2m",
	},
	{
		name: "a crash-loop ceiling below a second",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {"berth.io/crashloop-backoff-max": "100ms"}
spec:
  containers:
  - name: a
    image: busybox
`,
		wantProbs: []string{"5 metadata.annotations[berth.io/crashloop-backoff-max] Invalid"},
		wantMsg:   "must be at least 1s",
	},
	{
		name: "what a standalone node cannot honour",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  serviceAccountName: builder
  containers:
  - name: c
    image: nginx:1
    env:
    - name: PASSWORD
      valueFrom:
        secretKeyRef: {name: s, key: k}
  volumes:
  - name: conf
    configMap:
      name: conf
  - name: data
    persistentVolumeClaim:
      claimName: data
  - name: token
    projected:
      sources: []
`,
		wantProbs: []string{
			"6 spec.serviceAccountName Unsupported",
			"19 spec.volumes[1].persistentVolumeClaim Unsupported",
			"22 spec.volumes[2].projected Unsupported",
		},
		wantMsg: "not supported on a standalone node",
	},
	{
		name:      "no name",
		in:        strings.Replace(podspectest.Manifest("web", "nginx:1"), "  name: web\n", "  labels: {a: b}\n", 1),
		wantProbs: []string{"3 metadata.name Invalid"},
		wantMsg:   "web.yaml:3: metadata.name: Required value: a static pod needs a name",
	},
	{
		name:     "service account without a token is fine",
		in:       podspectest.Manifest("web", "nginx:1") + "  serviceAccountName: builder\n  automountServiceAccountToken: false\n",
		wantPods: []string{"web-node1_default"},
	},
	{
		name:     "runtimeClassName names the CRI runtime handler",
		in:       podspectest.Manifest("web", "nginx:1") + "  runtimeClassName: kata\n",
		wantPods: []string{"web-node1_default"},
	},
	{
		name:      "one bad item does not reject its siblings",
		in:        podspectest.List(podspectest.Manifest("good", "img:1"), podspectest.Manifest("bad", "")),
		wantPods:  []string{"good-node1_default"},
		wantProbs: []string{"19 items[1].spec.containers[0].image Invalid"},
	},
	{
		name:      "uid climbing out of the pod directory",
		in:        withUID(`"../../../victim"`),
		wantProbs: []string{"5 metadata.uid Invalid"},
		wantMsg:   `web.yaml:5: metadata.uid: Invalid value: "../../../victim": must consist of letters, digits`,
	},
	{
		name:      "uid with a newline",
		in:        withUID(`"abc\nINFO forged log line"`),
		wantProbs: []string{"5 metadata.uid Invalid"},
		wantMsg:   `Invalid value: "abc\nINFO forged log line"`,
	},
	{
		name:      "uid with a slash",
		in:        withUID(`a/b`),
		wantProbs: []string{"5 metadata.uid Invalid"},
	},
	{
		name:      "uid dot-dot",
		in:        withUID(`".."`),
		wantProbs: []string{"5 metadata.uid Invalid"},
	},
	{
		name:      "uid with an underscore, the log directory's separator",
		in:        withUID(`a_b`),
		wantProbs: []string{"5 metadata.uid Invalid"},
	},
	{
		name:      "uid with a NUL",
		in:        withUID(`"a\0b"`),
		wantProbs: []string{"5 metadata.uid Invalid"},
	},
	{
		name:      "uid too long",
		in:        withUID(strings.Repeat("a", 129)),
		wantProbs: []string{"5 metadata.uid Invalid"},
		wantMsg:   "may not be more than 128",
	},
	{
		name:     "uid: a UUID, a hex hash and a hand-written name",
		in:       podspectest.List(withUID("3f1c0a52-8d2e-4f0b-9b1e-6c7d8e9f0a1b"), strings.Replace(withUID("0123456789abcdef0123456789abcdef"), "name: web", "name: two", 1), strings.Replace(withUID("My-pod.v1"), "name: web", "name: three", 1)),
		wantPods: []string{"web-node1_default", "two-node1_default", "three-node1_default"},
	},
	{
		name: "container, init container, ephemeral container and volume names that are no path element",
		in: `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  initContainers:
  - name: "../init"
    image: busybox
  containers:
  - name: "a\nb"
    image: busybox
    volumeMounts:
    - {name: "..", mountPath: /data}
  ephemeralContainers:
  - name: "x/y"
    image: busybox
  volumes:
  - name: ".."
    emptyDir: {}
`,
		wantProbs: []string{
			"7 spec.initContainers[0].name Invalid",
			"10 spec.containers[0].name Invalid",
			"14 spec.ephemeralContainers Unsupported",
			"15 spec.ephemeralContainers[0].name Invalid",
			"18 spec.volumes[0].name Invalid",
		},
	},
	{
		name:      "namespace climbing out of the log directory",
		in:        strings.Replace(podspectest.Manifest("web", "nginx:1"), "  name: web\n", "  name: web\n  namespace: ../x\n", 1),
		wantProbs: []string{"5 metadata.namespace Invalid"},
	},
}

// withUID is the web pod with metadata.uid set to the YAML scalar uid.
func withUID(uid string) string {
	return strings.Replace(podspectest.Manifest("web", "nginx:1"), "  name: web\n", "  name: web\n  uid: "+uid+"\n", 1)
}

func TestParse(t *testing.T) {
	for _, tt := range parseCases {
		t.Run(tt.name, func(t *testing.T) {
			res := Parse([]byte(tt.in), webOrigin, podspectest.Node)
			var pods, probs []string
			for _, p := range res.Pods {
				pods = append(pods, FullName(p))
			}
			for _, p := range res.Problems {
				probs = append(probs, fmt.Sprintf("%d %s %s", p.Line, p.Field, p.Reason))
			}
			if strings.Join(pods, ",") != strings.Join(tt.wantPods, ",") {
				t.Errorf("pods = %v, want %v", pods, tt.wantPods)
			}
			if strings.Join(probs, "\n") != strings.Join(tt.wantProbs, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s\nfull: %v", strings.Join(probs, "\n"), strings.Join(tt.wantProbs, "\n"), res.Problems)
			}
			if tt.wantMsg != "" && (len(res.Problems) == 0 || !strings.Contains(res.Problems[0].Error(), tt.wantMsg)) {
				t.Errorf("first problem %v does not contain %q", res.Problems, tt.wantMsg)
			}
		})
	}
}

func parseOne(t *testing.T, in string, origin Origin, node string) *v1.Pod {
	t.Helper()
	res := Parse([]byte(in), origin, node)
	if len(res.Pods) != 1 || len(res.Problems) != 0 {
		t.Fatalf("Parse: pods %d, problems %v", len(res.Pods), res.Problems)
	}
	return res.Pods[0]
}

func TestDefaults(t *testing.T) {
	pod := parseOne(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  initContainers:
  - name: init
    image: busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000
  containers:
  - name: c
    image: registry:5000/team/web
    ports:
    - containerPort: 8080
    env:
    - name: NODE
      valueFrom:
        fieldRef: {fieldPath: spec.nodeName}
    resources:
      limits: {cpu: 500m}
    livenessProbe:
      httpGet: {port: 8080}
    lifecycle:
      preStop:
        httpGet: {port: 8080, path: /quit}
  - name: d
    image: nginx:1.27
  volumes:
  - name: scratch
  - name: host
    hostPath: {path: /srv}
`, webOrigin, podspectest.Node)
	spec := pod.Spec
	c := spec.Containers[0]
	probe := c.LivenessProbe
	cpu := resource.MustParse("500m")
	checks := []struct {
		what      string
		got, want any
	}{
		{"restartPolicy", spec.RestartPolicy, v1.RestartPolicyAlways},
		{"dnsPolicy", spec.DNSPolicy, v1.DNSClusterFirst},
		{"terminationGracePeriodSeconds", *spec.TerminationGracePeriodSeconds, int64(30)},
		{"securityContext", *spec.SecurityContext, v1.PodSecurityContext{}},
		{"schedulerName", spec.SchedulerName, "default-scheduler"},
		{"enableServiceLinks", *spec.EnableServiceLinks, true},
		{"priority", *spec.Priority, int32(2000001000)},
		{"nodeName", spec.NodeName, podspectest.Node},
		{"untagged image pulls Always", c.ImagePullPolicy, v1.PullAlways},
		{"digest pulls IfNotPresent", spec.InitContainers[0].ImagePullPolicy, v1.PullIfNotPresent},
		{"tag pulls IfNotPresent", spec.Containers[1].ImagePullPolicy, v1.PullIfNotPresent},
		{"terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", c.TerminationMessagePolicy, v1.TerminationMessageReadFile},
		{"port protocol", c.Ports[0].Protocol, v1.ProtocolTCP},
		{"hostNetwork hostPort", c.Ports[0].HostPort, int32(8080)},
		{"fieldRef apiVersion", c.Env[0].ValueFrom.FieldRef.APIVersion, "v1"},
		{"requests from limits", c.Resources.Requests.Cpu().Cmp(cpu), 0},
		{"probe timeout", probe.TimeoutSeconds, int32(1)},
		{"probe period", probe.PeriodSeconds, int32(10)},
		{"probe success", probe.SuccessThreshold, int32(1)},
		{"probe failure", probe.FailureThreshold, int32(3)},
		{"probe path", probe.HTTPGet.Path, "/"},
		{"probe scheme", probe.HTTPGet.Scheme, v1.URISchemeHTTP},
		{"preStop scheme", c.Lifecycle.PreStop.HTTPGet.Scheme, v1.URISchemeHTTP},
		{"preStop path kept", c.Lifecycle.PreStop.HTTPGet.Path, "/quit"},
		{"volume without source", *spec.Volumes[0].EmptyDir, v1.EmptyDirVolumeSource{}},
		{"hostPath type", *spec.Volumes[1].HostPath.Type, v1.HostPathUnset},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestIdentity(t *testing.T) {
	base := podspectest.Manifest("web", "nginx:1")
	uid := func(in string, origin Origin, node string) string {
		return string(parseOne(t, in, origin, node).UID)
	}
	first := uid(base, webOrigin, podspectest.Node)
	if len(first) != 32 {
		t.Fatalf("UID %q is not 32 hex digits", first)
	}
	tests := []struct {
		name   string
		in     string
		origin Origin
		node   string
		same   bool
	}{
		{"re-read", base, webOrigin, podspectest.Node, true},
		{"comment and formatting only", "# a comment\n" + strings.ReplaceAll(base, "  name: web", "  name: 'web'   # same"), webOrigin, podspectest.Node, true},
		{"image edited", podspectest.Manifest("web", "nginx:2"), webOrigin, podspectest.Node, false},
		{"another file", base, Origin{Source: SourceFile, Path: "/etc/kubernetes/manifests/other.yaml"}, podspectest.Node, false},
		{"another node", base, webOrigin, "node2", false},
	}
	for _, tt := range tests {
		if got := uid(tt.in, tt.origin, tt.node); (got == first) != tt.same {
			t.Errorf("%s: UID %s vs %s, want same=%v", tt.name, got, first, tt.same)
		}
	}

	pod := parseOne(t, base, webOrigin, podspectest.Node)
	want := map[string]string{
		AnnotationHash: string(pod.UID), AnnotationSource: SourceFile, AnnotationOrigin: webOrigin.Path,
	}
	for k, v := range want {
		if pod.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, pod.Annotations[k], v)
		}
	}
	if _, ok := pod.Annotations[AnnotationSeen]; ok {
		t.Error("config.seen is the store's to set")
	}
	fixed := parseOne(t, strings.Replace(base, "  name: web\n", "  name: web\n  uid: my-uid\n", 1), webOrigin, podspectest.Node)
	if fixed.UID != "my-uid" || fixed.Annotations[AnnotationHash] != "my-uid" {
		t.Errorf("metadata.uid not kept: %q", fixed.UID)
	}
}

// TestKindNotRunNamesNoPod: a kind berth does not run is a problem of the
// manifest, not of a pod it would name: no pod row shows it as if a
// Deployment were a broken pod.
func TestKindNotRunNamesNoPod(t *testing.T) {
	res := Parse([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: prod\n"), webOrigin, podspectest.Node)
	if len(res.Problems) != 1 || res.Problems[0].Name != "" || res.Problems[0].Namespace != "" {
		t.Fatalf("problems %+v, want one naming no pod", res.Problems)
	}
}
