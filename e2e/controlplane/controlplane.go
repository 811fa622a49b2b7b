// Package controlplane runs a real, private Kubernetes control plane for
// end-to-end tests of berth in a cluster: etcd and kube-apiserver built
// from their Go modules (once, cached by version beside the test beds'
// containerd), on loopback ports, with a self-signed CA, the Node
// authorizer and RBAC, the NodeRestriction admission plugin, an admin
// kubeconfig and node kubeconfigs (user system:node:NAME in system:nodes),
// bootstrap tokens and a signer for the CSRs of TLS bootstrap.
//
// Its state (the processes, their ports and files) is owned by the
// ControlPlane and guarded by its mutex.
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ControlPlane is etcd and one kube-apiserver.
type ControlPlane struct {
	// URL is the API server's https://127.0.0.1:PORT.
	URL string
	// AdminKubeconfig is a kubeconfig of a system:masters user.
	AdminKubeconfig string

	dir       string
	ca        *ca
	apiserver string // binary
	apiArgs   []string
	client    *http.Client // admin, for readiness

	mu   sync.Mutex
	etcd *proc
	api  *proc
}

// proc is a process and the channel closed when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// readyTimeout bounds the wait for each process to serve: kube-apiserver
// installs its API groups and bootstrap objects before /readyz says ok.
const readyTimeout = 3 * time.Minute

// Start builds (or takes from the cache) etcd and kube-apiserver and
// starts both in a new directory; Close stops them and removes it.
func Start() (*ControlPlane, error) {
	etcdBin, err := etcdBinary()
	if err != nil {
		return nil, err
	}
	apiBin, err := apiServerBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "berth-controlplane-")
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{dir: dir, apiserver: apiBin}
	if err := cp.start(etcdBin); err != nil {
		cp.Close()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) start(etcdBin string) error {
	var err error
	if cp.ca, err = newCA(cp.dir); err != nil {
		return err
	}
	serving, servingKey, err := cp.ca.issue("apiserver", "kube-apiserver", nil, true)
	if err != nil {
		return err
	}
	adminCert, adminKey, err := cp.ca.issue("admin", "admin", []string{"system:masters"}, false)
	if err != nil {
		return err
	}
	saPub, saKey, err := serviceAccountKey(cp.dir)
	if err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	cp.AdminKubeconfig = filepath.Join(cp.dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.AdminKubeconfig, cp.URL, cp.ca.certFile(), adminCert, adminKey); err != nil {
		return err
	}
	pair, err := tls.LoadX509KeyPair(adminCert, adminKey)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cp.ca.cert)
	cp.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
	}}

	cp.etcd, err = cp.run(etcdBin, "etcd.log",
		"--name", "e2e", "--data-dir", filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e2e="+peerURL, "--log-level", "warn",
		"--unsafe-no-fsync") // a test's data need not survive a crash of the machine
	if err != nil {
		return err
	}
	cp.apiArgs = []string{
		"--etcd-servers", clientURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(ports[2]),
		"--tls-cert-file", serving, "--tls-private-key-file", servingKey,
		"--client-ca-file", cp.ca.certFile(),
		"--authorization-mode", "Node,RBAC",
		// kubeadm join's bootstrap tokens (BootstrapKubeconfig).
		"--enable-bootstrap-token-auth",
		"--enable-admission-plugins", "NodeRestriction",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saPub, "--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--allow-privileged",
		// The kubernetes Service's endpoints would be the loopback
		// address, which the reconciler refuses; no test reaches it.
		"--endpoint-reconciler-type", "none",
		"--cert-dir", filepath.Join(cp.dir, "apiserver-certs"),
	}
	return cp.StartAPIServer()
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the
// same port and waits until it is ready.
func (cp *ControlPlane) StartAPIServer() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.api != nil {
		return errors.New("kube-apiserver is running")
	}
	cmd, err := cp.run(cp.apiserver, "kube-apiserver.log", cp.apiArgs...)
	if err != nil {
		return err
	}
	cp.api = cmd
	return cp.waitReady(cmd)
}

// StopAPIServer stops kube-apiserver, leaving etcd and its data.
func (cp *ControlPlane) StopAPIServer() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	stop(cp.api)
	cp.api = nil
}

// NodeKubeconfig writes the kubeconfig of node name: a client certificate
// for system:node:NAME in system:nodes, what the Node authorizer and
// NodeRestriction recognize as the node.
func (cp *ControlPlane) NodeKubeconfig(name string) (string, error) {
	cert, key, err := cp.ca.issue("node-"+name, "system:node:"+name, []string{"system:nodes"}, false)
	if err != nil {
		return "", err
	}
	path := filepath.Join(cp.dir, "node-"+name+".kubeconfig")
	return path, writeKubeconfig(path, cp.URL, cp.ca.certFile(), cert, key)
}

// Logs returns the tail of the API server's and etcd's logs, for a failed
// test.
func (cp *ControlPlane) Logs() string {
	var out string
	for _, f := range []string{"kube-apiserver.log", "etcd.log"} {
		b, _ := os.ReadFile(filepath.Join(cp.dir, f))
		if len(b) > 8<<10 {
			b = b[len(b)-8<<10:]
		}
		out += fmt.Sprintf("--- %s (tail)\n%s\n", f, b)
	}
	return out
}

// Close stops both processes and removes the directory.
func (cp *ControlPlane) Close() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	stop(cp.api)
	stop(cp.etcd)
	cp.api, cp.etcd = nil, nil
	os.RemoveAll(cp.dir)
}

// run starts bin with args, its output appended to log in the directory;
// it dies with the test binary.
func (cp *ControlPlane) run(bin, log string, args ...string) (*proc, error) {
	f, err := os.OpenFile(filepath.Join(cp.dir, log), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls /readyz until kube-apiserver says ok, it exits, or
// readyTimeout passes.
func (cp *ControlPlane) waitReady(p *proc) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var last string
	for {
		select {
		case <-p.done:
			return fmt.Errorf("kube-apiserver exited: %s\n%s", p.cmd.ProcessState, cp.Logs())
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		resp, err := cp.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready after %s: %s\n%s", readyTimeout, last, cp.Logs())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop ends p with SIGTERM, then SIGKILL after 10 s.
func stop(p *proc) {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// freePorts returns n loopback ports nobody listens on.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
