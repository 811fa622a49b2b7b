//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
)

// testCertLifetime is what the test's signer issues: short, so that the
// rotation (at 70-90% of it) happens within the test.
const testCertLifetime = time.Minute

// csrSigner approves and signs every kubelet client CSR, as
// kube-controller-manager's csrapproving and csrsigning controllers would
// (the test's control plane runs neither), and records who asked.
type csrSigner struct {
	c *cluster

	mu     sync.Mutex        // guards issued
	issued map[string]string // serial -> the CSR's requesting user
}

// startSigner watches the CSRs until the test ends.
func startSigner(c *cluster) *csrSigner {
	s := &csrSigner{c: c, issued: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s.watch(ctx)
		}
	}()
	return s
}

// watch handles the CSRs of one watch (which starts with every CSR there
// is), until it ends.
func (s *csrSigner) watch(ctx context.Context) {
	csrs := s.c.admin.CertificatesV1().CertificateSigningRequests()
	w, err := csrs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return
	}
	defer w.Stop()
	// The events of the signer's own approval still carry no
	// certificate: each CSR is signed once.
	signed := map[types.UID]bool{}
	for ev := range w.ResultChan() {
		csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok || ev.Type == watch.Deleted || csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName ||
			len(csr.Status.Certificate) > 0 || signed[csr.UID] {
			continue
		}
		if err := s.sign(ctx, csr); err != nil {
			if ctx.Err() == nil {
				s.c.t.Logf("signer: CSR %s: %v", csr.Name, err)
			}
			continue
		}
		signed[csr.UID] = true
	}
}

// sign approves csr (UpdateApproval) and writes its certificate
// (UpdateStatus).
func (s *csrSigner) sign(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	csrs := s.c.admin.CertificatesV1().CertificateSigningRequests()
	approved := false
	for _, c := range csr.Status.Conditions {
		approved = approved || c.Type == certificatesv1.CertificateApproved
	}
	if !approved {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "E2EApprove", Message: "approved by the test",
		})
		var err error
		if csr, err = csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("approve: %w", err)
		}
	}
	cert, err := cp.SignCSR(csr.Spec.Request, testCertLifetime)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	csr.Status.Certificate = cert
	if _, err := csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("write the certificate: %w", err)
	}
	block, _ := pem.Decode(cert)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.issued[leaf.SerialNumber.String()] = csr.Spec.Username
	s.mu.Unlock()
	return nil
}

// requester is the user whose CSR got the certificate of serial, "" if
// the signer issued none.
func (s *csrSigner) requester(serial string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued[serial]
}

// nodeCert reads the client certificate the kubeconfig berth wrote points
// at, with the file's mode.
func nodeCert(kubeconfig string) (*x509.Certificate, string, os.FileMode, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, "", 0, err
	}
	pair, err := tls.LoadX509KeyPair(rc.CertFile, rc.KeyFile)
	if err != nil {
		return nil, "", 0, err
	}
	fi, err := os.Stat(rc.CertFile)
	if err != nil {
		return nil, "", 0, err
	}
	return pair.Leaf, rc.CertFile, fi.Mode().Perm(), nil
}

// TestClusterTLSBootstrap joins berth with kubeadm join's credentials: no
// --kubeconfig yet, a bootstrap token in --bootstrap-kubeconfig. berth
// sends a CSR as the token's user, the test approves and signs it, berth
// writes key and certificate to <root>/pki and the kubeconfig, and
// registers its Node as system:node:NODE with it (NodeRestriction lets no
// one else). The certificate lives a minute: berth rotates it with a CSR
// sent as the node itself, the file gets the new serial, and the node
// keeps renewing its Lease with it. The kubelet's healthz port answers.
func TestClusterTLSBootstrap(t *testing.T) {
	c := clusterAdmin(t)
	signer := startSigner(c)
	boot, tokenID, err := cp.BootstrapKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubelet.conf")
	args := append(clusterArgs(t, kubeconfig), "--bootstrap-kubeconfig", boot)
	healthz := "http://127.0.0.1:" + args[3] + "/healthz"
	c.b = newBerth(t, berthOptions{manifests: map[string]string{"web.yaml": podManifest(sleeper("web"))}, args: args})

	c.waitNode("registered and Ready with the bootstrapped certificate", nodeReady)
	first, path, mode, err := nodeCert(kubeconfig)
	if err != nil {
		t.Fatalf("the kubeconfig berth wrote: %v", err)
	}
	if want := filepath.Join(c.b.root, "pki", "kubelet-client-current.pem"); path != want || mode != 0o600 {
		t.Errorf("client certificate %s mode %o, want %s 0600", path, mode, want)
	}
	if first.Subject.CommonName != "system:node:"+nodeName || !slices.Equal(first.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("certificate subject %s, want CN=system:node:%s, O=system:nodes", first.Subject, nodeName)
	}
	if who := signer.requester(first.SerialNumber.String()); who != "system:bootstrap:"+tokenID {
		t.Errorf("first certificate requested by %q, want the bootstrap token's user system:bootstrap:%s", who, tokenID)
	}
	c.waitMirrors("web mirrored by the bootstrapped node", func(ms []v1.Pod) (bool, string) {
		_, n := mirrorNamed(ms, podName("web"))
		return n == 1, describeMirrors(ms)
	})

	// Rotation: a new certificate in the same file, asked for by the node.
	var second *x509.Certificate
	c.b.waitFor("a rotated certificate", clusterTimeout, func() (bool, string) {
		cert, _, _, err := nodeCert(kubeconfig)
		if err != nil {
			return false, err.Error()
		}
		second = cert
		return cert.SerialNumber.Cmp(first.SerialNumber) != 0, "serial " + cert.SerialNumber.String()
	})
	if who := signer.requester(second.SerialNumber.String()); who != "system:node:"+nodeName {
		t.Errorf("rotated certificate requested by %q, want the node itself", who)
	}
	rotated := time.Now()
	lease := c.admin.CoordinationV1().Leases("kube-node-lease")
	c.b.waitFor("a Lease renewal after the rotation", clusterTimeout, func() (bool, string) {
		l, err := lease.Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(rotated), fmt.Sprint(l.Spec.RenewTime)
	})

	resp, err := http.Get(healthz)
	if err != nil {
		t.Fatalf("GET %s: %v", healthz, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Errorf("GET %s = %d %q, want 200 ok", healthz, resp.StatusCode, body)
	}
	if code, _ := c.b.status("/healthz"); code != http.StatusOK {
		t.Errorf("--listen /healthz = %d while the healthz port says ok", code)
	}
}
