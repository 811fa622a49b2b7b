package podspectest

import (
	"fmt"
	"strings"
)

// Node is the node name the tests run as.
const Node = "node1"

// Manifest is a valid one-container pod; image tells versions apart.
func Manifest(name, image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: main
    image: %s
`, name, image)
}

// List joins pod manifests into one PodList, as a URL source serves them.
func List(pods ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: PodList\nitems:\n")
	for _, p := range pods {
		for i, line := range strings.Split(strings.TrimSuffix(p, "\n"), "\n") {
			if i == 0 {
				b.WriteString("- " + line + "\n")
			} else {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	return b.String()
}

// Pods is a stream of n minimal pod documents; 100,000 of them are
// 9.6 MB.
func Pods(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p%d}\nspec: {containers: [{name: c, image: i}]}\n", i)
	}
	return []byte(b.String())
}

// Manifests of a pod referencing a ConfigMap and a Secret.
const (
	// ConfigMap is the ConfigMap "files" with a text and a binary key.
	ConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: files
data:
  greeting: hello
binaryData:
  blob: AAE=
`
	// Secret is the Secret "db" with data and stringData.
	Secret = `apiVersion: v1
kind: Secret
metadata:
  name: db
data:
  user: YXBw
stringData:
  password: hunter2
`
	// RefPod mounts "files", takes MODE from "envs" and the password from
	// "db". Line 15 names the ConfigMap of the volume.
	RefPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: main
    image: busybox:1.36
    env:
    - name: PW
      valueFrom:
        secretKeyRef: {name: db, key: password}
  volumes:
  - name: files
    configMap: {name: files}
`
)

// Sized is a pod of the size operators write: a few ports, env,
// probes, resources and volumes.
func Sized(i int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: app-%d
  namespace: edge
  labels:
    app: app-%d
    tier: backend
spec:
  containers:
  - name: app
    image: registry.local:5000/team/app:1.%d
    args: ["--port=8080", "--metrics=9090"]
    ports:
    - name: http
      containerPort: 8080
    - name: metrics
      containerPort: 9090
    env:
    - name: NODE
      valueFrom:
        fieldRef:
          fieldPath: spec.nodeName
    - name: LOG_LEVEL
      value: info
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {memory: 128Mi}
    livenessProbe:
      httpGet: {path: /healthz, port: http}
    readinessProbe:
      tcpSocket: {port: 8080}
    volumeMounts:
    - name: data
      mountPath: /data
    - name: cache
      mountPath: /cache
  volumes:
  - name: data
    hostPath: {path: /srv/app-%d, type: DirectoryOrCreate}
  - name: cache
    emptyDir: {sizeLimit: 1Gi}
`, i, i, i, i)
}
