//go:build e2e

package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/testbed"
)

// TestSignedFleetURL runs berth as one device of a fleet: Debian's nginx
// serves per-group, per-node manifests over https with a private CA, signed
// with ssh-keygen as docs/fleet.md says. The URL's
// {label.site} and {node} pick this device's manifest among others'; a
// signed body runs; a tampered body, and a replayed older one (also after
// a berth restart), change nothing and show as problems, in metrics and in
// `berth pods`.
func TestSignedFleetURL(t *testing.T) {
	dir := t.TempDir()
	fleet := newFleetServer(t, dir)
	keygen(t, dir, nil, "-q", "-t", "ed25519", "-N", "", "-C", "fleet", "-f", "fleet_key")
	pub, err := os.ReadFile(filepath.Join(dir, "fleet_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, []byte("fleet@example.com "+string(pub)), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nlabels:\n  site: lyon\n  ring: canary\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Other devices' and groups' manifests, validly signed, must not run.
	mine := "lyon/" + nodeName + ".yaml"
	fleet.publish(t, "lyon/other-node.yaml", signedPods(1, sleeper("other-node-pod")))
	fleet.publish(t, "paris/"+nodeName+".yaml", signedPods(1, sleeper("paris-pod")))
	v1Body := signedPods(1, sleeper("fleet-a"))
	fleet.publish(t, mine, v1Body)
	v1Sig := fleet.read(t, mine+".sig")

	b := newBerth(t, berthOptions{args: []string{
		"--config", config,
		"--manifest-url", fleet.url + "/{label.site}/{node}.yaml",
		"--manifest-url-ca", fleet.caFile,
		"--manifest-url-allowed-signers", signers,
		"--http-check-frequency", "1s",
	}})
	b.waitReady()
	a := b.waitRunning(podName("fleet-a"))
	if a.Annotations["berth.io/config.origin"] != fleet.url+"/"+mine {
		t.Errorf("origin %q, want this node's manifest in its site", a.Annotations["berth.io/config.origin"])
	}
	if !b.logContains(`msg="signed manifest accepted"`) || !b.logContains("serial=1 signer=fleet@example.com") {
		t.Error("the accepted serial and signer are not logged")
	}

	// Tampered: a pod added to the body, the signature unchanged.
	fleet.put(t, mine, strings.Replace(v1Body, "items:\n", "items:\n"+indentItem(podManifest(sleeper("evil")))+"\n", 1))
	b.waitProblem("BadSignature", filepath.Base(mine))
	assertSignatureFailures(t, b, "http", "BadSignature")
	out := berthPods(t, b)
	if !strings.Contains(out, "does not match the body") {
		t.Errorf("berth pods does not show the bad signature:\n%s", out)
	}

	// A new signed version: runs, and the problem is gone.
	fleet.publish(t, mine, signedPods(2, sleeper("fleet-a"), sleeper("fleet-b")))
	bPod := b.waitRunning(podName("fleet-b"))
	b.waitFor("no problem", waitTimeout, func() (bool, string) {
		ps, err := b.problemsOf()
		return err == nil && len(ps) == 0, fmt.Sprint(ps, err)
	})
	before := b.waitRuntime(podName("fleet-b"), "main", bPod.UID)
	fleet.logLatency(t, b, "/"+mine, "serial=2", before.container.Id)

	// Replay of serial 1, body and signature as they were served.
	fleet.put(t, mine+".sig", string(v1Sig))
	fleet.put(t, mine, v1Body)
	b.waitProblem("Replayed", filepath.Base(mine))
	assertSignatureFailures(t, b, "http", "Replayed")

	// A restart with the replay still served: the persisted serial
	// refuses it, the running pods are adopted as they run.
	b.stop()
	b.start()
	b.waitProblem("Replayed", filepath.Base(mine))
	b.waitPod(podName("fleet-b"), "Running with the adopted container", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return p.UID == bPod.UID && cs != nil && cs.State.Running != nil && shortID(cs.ContainerID) == shortID(before.container.Id)
	})
	for _, name := range []string{"evil", "other-node-pod", "paris-pod"} {
		if sbs, err := sandboxesOf(podName(name)); err != nil || len(sbs) > 0 {
			t.Errorf("pod %s has sandboxes %v (%v): it must never run here", name, sbs, err)
		}
	}
	if _, err := b.apiPod(podName("fleet-a")); err != nil {
		t.Errorf("fleet-a after the replay: %v", err)
	}
}

// signedPods is a PodList of pods with the serial line a signed body
// starts with.
func signedPods(serial int, pods ...*v1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# berth.io/serial: %d\napiVersion: v1\nkind: PodList\nitems:\n", serial)
	for _, p := range pods {
		b.WriteString(indentItem(podManifest(p)) + "\n")
	}
	return b.String()
}

// indentItem turns a manifest into an item of a PodList's items.
func indentItem(manifest string) string {
	lines := strings.Split(strings.TrimRight(manifest, "\n"), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = "- " + l
		} else {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}

// assertSignatureFailures checks /metrics counts refused bodies of source
// and reason.
func assertSignatureFailures(t *testing.T, b *berth, source, reason string) {
	t.Helper()
	code, body := b.status("/metrics")
	want := `berth_manifest_signature_failures_total{reason="` + reason + `",source="` + source + `"} `
	if code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// berthPods runs `berth pods` against b and returns what it printed.
func berthPods(t *testing.T, b *berth) string {
	t.Helper()
	cmd := exec.Command(berthBin, "pods")
	cmd.Env = append(os.Environ(), "BERTH_SOCKET="+b.socket)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("berth pods: %v\n%s", err, out)
	}
	return string(out)
}

// keygen runs ssh-keygen in dir.
func keygen(t *testing.T, dir string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("ssh-keygen", args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh-keygen %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// fleetServer is a private nginx (Debian's package, as an operator would
// run it) serving dir/www over https on a loopback port, with a
// certificate of a private CA.
type fleetServer struct {
	dir, www string
	url      string // https://127.0.0.1:PORT
	caFile   string
}

// newFleetServer starts nginx in the foreground with a config of its own
// (no system service, no file outside dir) and stops it at cleanup.
func newFleetServer(t *testing.T, dir string) *fleetServer {
	t.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		nginx = "/usr/sbin/nginx"
	}
	f := &fleetServer{dir: dir, www: filepath.Join(dir, "www"), caFile: filepath.Join(dir, "ca.pem")}
	for _, d := range []string{f.www, filepath.Join(dir, "nginx-tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTLS(t, dir)
	addr := testbed.FreeAddr(t)
	f.url = "https://" + addr
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
	log_format fleet '$msec $status "$request"';
	access_log %[1]s/access.log fleet;
	client_body_temp_path %[1]s/nginx-tmp/body;
	proxy_temp_path %[1]s/nginx-tmp/proxy;
	fastcgi_temp_path %[1]s/nginx-tmp/fastcgi;
	uwsgi_temp_path %[1]s/nginx-tmp/uwsgi;
	scgi_temp_path %[1]s/nginx-tmp/scgi;
	types { application/yaml yaml; }
	default_type application/octet-stream;
	server {
		listen %[2]s ssl;
		ssl_certificate %[1]s/server.pem;
		ssl_certificate_key %[1]s/server-key.pem;
		root %[1]s/www;
	}
}
`, dir, addr)
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", confFile, "-e", filepath.Join(dir, "error.log"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx (apt-get install nginx; e2e/testbed/install.sh does): %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", out.String(), log)
		}
	})
	waitCond(t, "nginx listening on "+addr, waitTimeout, func() (bool, string) {
		select {
		case err := <-exited:
			t.Fatalf("nginx exited: %v\n%s", err, out.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	return f
}

// publish writes a manifest and its signature as docs/fleet.md says to:
// signed with ssh-keygen (stdin to stdout), the body published first, then
// its signature, each renamed into place.
func (f *fleetServer) publish(t *testing.T, name, body string) {
	t.Helper()
	sig := keygen(t, f.dir, []byte(body), "-Y", "sign", "-f", "fleet_key", "-n", "berth-manifest")
	f.put(t, name, body)
	f.put(t, name+".sig", string(sig))
}

// put replaces www/name atomically.
func (f *fleetServer) put(t *testing.T, name, content string) {
	t.Helper()
	p := filepath.Join(f.www, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

func (f *fleetServer) read(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.www, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// logLatency logs what a new signed body takes to run on a device once
// polled: from nginx's answer to the last 200 GET of path before container
// id started, to berth's log line with accepted (body and signature
// fetched and checked, serial persisted), and to that start. Figures, not
// assertions: the machine is shared.
func (f *fleetServer) logLatency(t *testing.T, b *berth, path, accepted, id string) {
	t.Helper()
	ctx, cancel := criCtx()
	defer cancel()
	st, err := bed.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Unix(0, st.GetStatus().GetStartedAt())
	var got time.Time
	for _, line := range strings.Split(string(f.read(t, "../access.log")), "\n") {
		var sec float64
		var status int
		var method, uri string
		if _, err := fmt.Sscanf(line, "%f %d \"%s %s", &sec, &status, &method, &uri); err != nil || status != 200 || uri != path {
			continue
		}
		if at := time.Unix(0, int64(sec*1e9)); at.Before(started) {
			got = at
		}
	}
	if got.IsZero() {
		t.Fatalf("no GET %s before the container started at %s in nginx's access log", path, started)
	}
	var acceptedAt time.Time
	log, _ := os.ReadFile(b.logFile)
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, `msg="signed manifest accepted"`) && strings.Contains(line, accepted) {
			ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			acceptedAt, _ = time.Parse(time.RFC3339Nano, ts)
		}
	}
	t.Logf("figure: GET of the new signed body at nginx -> accepted by berth %s -> its new container started %s (poll period aside)",
		acceptedAt.Sub(got).Round(time.Millisecond), started.Sub(got).Round(time.Millisecond))
}

// writeTLS writes a private CA (ca.pem) and a server certificate for
// 127.0.0.1 signed by it (server.pem, server-key.pem) into dir.
func writeTLS(t *testing.T, dir string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth e2e fleet CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"ca.pem":         {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem":     {Type: "CERTIFICATE", Bytes: srvDER},
		"server-key.pem": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSignedManifestFiles runs berth with --pod-manifest-allowed-signers:
// a manifest file signed with ssh-keygen (web.yaml.sig beside it) runs, an
// unsigned one is a problem and never starts.
func TestSignedManifestFiles(t *testing.T) {
	dir := t.TempDir()
	keygen(t, dir, nil, "-q", "-t", "ed25519", "-N", "", "-C", "fleet", "-f", "fleet_key")
	pub, err := os.ReadFile(filepath.Join(dir, "fleet_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	body := signedPods(1, sleeper("signed-file"))
	b := newBerth(t, berthOptions{
		args: []string{"--pod-manifest-allowed-signers", signers},
		manifests: map[string]string{
			"signed.yaml":     body,
			"signed.yaml.sig": string(keygen(t, dir, []byte(body), "-Y", "sign", "-f", "fleet_key", "-n", "berth-manifest")),
			"unsigned.yaml":   podManifest(sleeper("unsigned-file")),
		},
	})
	b.waitReady()
	b.waitRunning(podName("signed-file"))
	b.waitProblem("Unsigned", "unsigned.yaml")
	assertSignatureFailures(t, b, "file", "Unsigned")
	if sbs, err := sandboxesOf(podName("unsigned-file")); err != nil || len(sbs) > 0 {
		t.Errorf("the unsigned manifest's pod has sandboxes %v (%v)", sbs, err)
	}
}

// TestSignedManifestReplayUnderAnotherName runs berth with
// --pod-manifest-allowed-signers and a pod at serial 2, then drops the
// pod's older signed version (serial 1, with its valid signature) under a
// file name that sorts first: berth refuses it as Replayed, the running
// pod keeps its UID, sandbox and container, and web.yaml is not taken for
// a duplicate. A serial is bound to the pod, not to its file's name.
func TestSignedManifestReplayUnderAnotherName(t *testing.T) {
	dir := t.TempDir()
	keygen(t, dir, nil, "-q", "-t", "ed25519", "-N", "", "-C", "fleet", "-f", "fleet_key")
	pub, err := os.ReadFile(filepath.Join(dir, "fleet_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	sign := func(body string) string {
		return string(keygen(t, dir, []byte(body), "-Y", "sign", "-f", "fleet_key", "-n", "berth-manifest"))
	}
	old := signedPods(1, newPod("replayed-web", shContainer("main", "echo version 1; "+sleepForever)))
	cur := signedPods(2, newPod("replayed-web", shContainer("main", "echo version 2; "+sleepForever)))
	b := newBerth(t, berthOptions{
		args:      []string{"--pod-manifest-allowed-signers", signers},
		manifests: map[string]string{"web.yaml": cur, "web.yaml.sig": sign(cur)},
	})
	b.waitReady()
	name := podName("replayed-web")
	running := b.waitRunning(name)
	sandboxes, err := sandboxesOf(name)
	if err != nil || len(sandboxes) != 1 {
		t.Fatalf("sandboxes of %s: %v (%v), want one", name, sandboxes, err)
	}
	container := containerStatus(running, "main").ContainerID

	// The signature first, so the body is never read without it.
	b.writeManifest("0-web.yaml.sig", sign(old))
	b.writeManifest("0-web.yaml", old)
	b.waitProblem("Replayed", "0-web.yaml")

	ps, err := b.problemsOf()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p != "Replayed 0-web.yaml" {
			t.Errorf("problem %q besides the replay", p)
		}
	}
	if out := berthPods(t, b); !strings.Contains(out, "serial 1 is older than 2") {
		t.Errorf("berth pods does not show the replay:\n%s", out)
	}
	assertSignatureFailures(t, b, "file", "Replayed")
	p, err := b.apiPod(name)
	if err != nil || p == nil {
		t.Fatalf("%s after the replay: %v, %v", name, p, err)
	}
	if p.UID != running.UID {
		t.Errorf("%s: uid %s after the replay, was %s", name, p.UID, running.UID)
	}
	if cs := containerStatus(p, "main"); cs == nil || cs.ContainerID != container || cs.RestartCount != 0 {
		t.Errorf("%s: container %+v after the replay, was %s", name, cs, container)
	}
	if now, err := sandboxesOf(name); err != nil || len(now) != 1 || now[0].Id != sandboxes[0].Id {
		t.Errorf("sandboxes of %s after the replay: %v (%v), want only %s", name, now, err, sandboxes[0].Id)
	}
}
