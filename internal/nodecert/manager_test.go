package nodecert

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// outcome is what the fake signer does with a CSR.
type outcome int

const (
	issue  outcome = iota // approve and sign
	deny                  // Denied condition
	fail                  // Failed condition
	ignore                // never answered
	down                  // Create fails: API server unreachable
)

// signer is an in-memory certificates/v1 API and the csrsigning
// controller behind it: each CSR gets the outcome next says.
type signer struct {
	t        *testing.T
	caCert   *x509.Certificate
	caKey    *ecdsa.PrivateKey
	lifetime time.Duration

	mu      sync.Mutex // guards the fields below
	next    func(n int) outcome
	csrs    []*certificatesv1.CertificateSigningRequest
	viaBoot []bool // per CSR: sent with the bootstrap credentials
	serial  int64
}

func newSigner(t *testing.T, lifetime time.Duration, next func(n int) outcome) *signer {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(1000 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &signer{t: t, caCert: ca, caKey: key, lifetime: lifetime, next: next, serial: 100}
}

// client is the CSR client over rc: bootstrap credentials carry a token.
func (s *signer) client(rc *rest.Config) (CSRClient, error) {
	return fakeClient{s, rc.BearerToken != ""}, nil
}

type fakeClient struct {
	s    *signer
	boot bool
}

func (c fakeClient) Create(_ context.Context, csr *certificatesv1.CertificateSigningRequest, _ metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.csrs)
	o := s.next(n)
	if o == down {
		return nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	}
	out := csr.DeepCopy()
	out.Name, out.UID = fmt.Sprintf("csr-%d", n), types.UID(fmt.Sprintf("uid-%d", n))
	switch o {
	case deny:
		out.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Reason: "NotAllowed", Message: "no"}}
	case fail:
		out.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateFailed, Reason: "SignerError", Message: "broken"}}
	case issue:
		out.Status.Certificate = s.sign(out)
	}
	s.csrs = append(s.csrs, out)
	s.viaBoot = append(s.viaBoot, c.boot)
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: out.ObjectMeta, Spec: out.Spec}, nil
}

func (c fakeClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for _, csr := range c.s.csrs {
		if csr.Name == name {
			return csr.DeepCopy(), nil
		}
	}
	return nil, fmt.Errorf("CSR %s not found", name)
}

// sign issues the CSR's certificate as the csrsigning controller, valid
// for the signer's lifetime from now.
func (s *signer) sign(csr *certificatesv1.CertificateSigningRequest) []byte {
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		s.t.Errorf("CSR request: %v", err)
		return nil
	}
	s.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(s.serial), Subject: req.Subject, NotBefore: time.Now(), NotAfter: time.Now().Add(s.lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.caCert, req.PublicKey, s.caKey)
	if err != nil {
		s.t.Errorf("sign: %v", err)
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (s *signer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.csrs)
}

// setup writes a bootstrap kubeconfig and builds a manager in dir,
// logging to log (nowhere if nil).
func setup(t *testing.T, s *signer, rotate bool, log ...*slog.Logger) (*Manager, string) {
	dir := t.TempDir()
	boot := filepath.Join(dir, "bootstrap-kubelet.conf")
	if err := os.WriteFile(boot, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: "abcdef.0123456789abcdef"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if len(log) > 0 {
		logger = log[0]
	}
	m, err := New(Config{Kubeconfig: filepath.Join(dir, "kubelet.conf"), BootstrapKubeconfig: boot, PKIDir: filepath.Join(dir, "pki"),
		NodeName: "n1", Rotate: rotate, NewClient: s.client, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// fileSerial is the serial of the certificate in the PKI file, "" if none.
func fileSerial(t *testing.T, dir string) string {
	p := filepath.Join(dir, "pki", CertFile)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return ""
	}
	c, err := tls.LoadX509KeyPair(p, p)
	if err != nil {
		t.Fatalf("PKI file: %v", err)
	}
	return c.Leaf.SerialNumber.String()
}

// TestBootstrap: the first certificate comes from a CSR sent with the
// bootstrap credentials, for the kubelet's signer, subject and usages;
// key and certificate are written 0600 and the kubeconfig points at them.
func TestBootstrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSigner(t, 24*time.Hour, func(int) outcome { return issue })
		m, dir := setup(t, s, true)
		if m.current.Load() != nil || !m.Expiry().IsZero() {
			t.Fatalf("a certificate before bootstrap (expiry %v)", m.Expiry())
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = m.Run(ctx); close(done) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		if m.current.Load() == nil {
			t.Fatal("no certificate after bootstrap")
		}
		if got, want := m.Expiry(), m.current.Load().Leaf.NotAfter; got.IsZero() || !got.Equal(want) {
			t.Errorf("Expiry = %v, want the certificate's NotAfter %v", got, want)
		}
		if s.count() != 1 || !s.viaBoot[0] {
			t.Fatalf("CSRs %d (bootstrap %v), want one with the bootstrap credentials", s.count(), s.viaBoot)
		}
		csr := s.csrs[0]
		if csr.Spec.SignerName != SignerName {
			t.Errorf("signer %q", csr.Spec.SignerName)
		}
		if want := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}; !slices.Equal(csr.Spec.Usages, want) {
			t.Errorf("usages %v, want %v", csr.Spec.Usages, want)
		}
		block, _ := pem.Decode(csr.Spec.Request)
		req, _ := x509.ParseCertificateRequest(block.Bytes)
		if req.Subject.CommonName != "system:node:n1" || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
			t.Errorf("subject %v", req.Subject)
		}
		if _, ok := req.PublicKey.(*ecdsa.PublicKey); !ok {
			t.Errorf("key %T, want ECDSA", req.PublicKey)
		}
		p := filepath.Join(dir, "pki", CertFile)
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("PKI file: %v, %v", fi, err)
		}
		rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubelet.conf"))
		if err != nil {
			t.Fatal(err)
		}
		if rc.CertFile != p || rc.KeyFile != p || rc.Host != "https://127.0.0.1:6443" || rc.BearerToken != "" {
			t.Errorf("kubeconfig: host %s cert %s key %s token %q", rc.Host, rc.CertFile, rc.KeyFile, rc.BearerToken)
		}
		got, err := loadClientCert(rc)
		if err != nil || !bytes.Equal(got.Certificate[0], m.current.Load().Certificate[0]) {
			t.Errorf("kubeconfig's certificate is not the current one: %v", err)
		}
		// A restart reads the written credentials and sends no CSR.
		m2, err := New(m.cfg)
		if err != nil || m2.current.Load() == nil || !bytes.Equal(m2.current.Load().Certificate[0], m.current.Load().Certificate[0]) {
			t.Errorf("restart: %v, certificate %v", err, m2.current.Load() != nil)
		}
		cancel()
		<-done
	})
}

// TestRotation: at 70-90% of the lifetime a new CSR goes with the node's
// own credentials and the new pair replaces the old.
func TestRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const life = 10 * time.Hour
		s := newSigner(t, life, func(int) outcome { return issue })
		m, dir := setup(t, s, true)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = m.Run(ctx); close(done) }()
		time.Sleep(time.Minute)
		first := fileSerial(t, dir)
		time.Sleep(life * 69 / 100)
		synctest.Wait()
		if s.count() != 1 {
			t.Fatalf("%d CSRs before 70%% of the lifetime", s.count())
		}
		time.Sleep(life * 22 / 100)
		synctest.Wait()
		if s.count() != 2 || s.viaBoot[1] {
			t.Fatalf("%d CSRs (bootstrap %v) after 91%%: want a rotation with the node's credentials", s.count(), s.viaBoot)
		}
		if second := fileSerial(t, dir); second == first || second != m.current.Load().Leaf.SerialNumber.String() {
			t.Errorf("serial %s after rotation (was %s, current %s)", second, first, m.current.Load().Leaf.SerialNumber)
		}
		cancel()
		<-done
	})
}

// TestRotationFailures: a denied, failed, unanswered or unreachable
// rotation is retried with back-off while the old certificate stays in
// use and on disk; once the old one expired, the bootstrap credentials
// are used again.
func TestRotationFailures(t *testing.T) {
	for _, o := range []struct {
		name string
		o    outcome
	}{{"denied", deny}, {"failed", fail}, {"not answered", ignore}, {"unreachable", down}} {
		t.Run(o.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const life = 10 * time.Hour
				var broken sync.Mutex // guards failing
				failing := true
				s := newSigner(t, life, func(n int) outcome {
					broken.Lock()
					defer broken.Unlock()
					if n == 0 || !failing {
						return issue
					}
					return o.o
				})
				m, dir := setup(t, s, true)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { _ = m.Run(ctx); close(done) }()
				time.Sleep(time.Minute)
				first := fileSerial(t, dir)
				firstCert := m.current.Load()
				time.Sleep(life * 101 / 100)
				synctest.Wait()
				if fileSerial(t, dir) != first || m.current.Load() != firstCert {
					t.Fatal("the certificate changed although every rotation failed")
				}
				if o.o != down && s.count() < 3 {
					t.Errorf("%d CSRs: the failed rotation was not retried", s.count())
				}
				broken.Lock()
				failing = false
				broken.Unlock()
				time.Sleep(time.Hour)
				synctest.Wait()
				if fileSerial(t, dir) == first {
					t.Fatal("no new certificate once the signer answers again")
				}
				s.mu.Lock()
				last := s.viaBoot[len(s.viaBoot)-1]
				s.mu.Unlock()
				if !last {
					t.Error("after expiry the CSR did not use the bootstrap credentials")
				}
				cancel()
				<-done
			})
		})
	}
}

// TestBootstrapDenied: a denied bootstrap leaves no credentials and is
// retried, the denial logged once although each CSR has its own name.
func TestBootstrapDenied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSigner(t, time.Hour, func(int) outcome { return deny })
		var mu sync.Mutex // guards warns
		warns := 0
		m, dir := setup(t, s, true, slog.New(countingHandler{&mu, &warns}))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = m.Run(ctx); close(done) }()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if m.current.Load() != nil || fileSerial(t, dir) != "" {
			t.Fatal("credentials from a denied CSR")
		}
		if _, err := os.Stat(filepath.Join(dir, "kubelet.conf")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("kubeconfig written: %v", err)
		}
		if s.count() < 3 {
			t.Errorf("%d CSRs: not retried", s.count())
		}
		if warns != 1 {
			t.Errorf("%d warnings for %d denials, want 1", warns, s.count())
		}
		cancel()
		<-done
	})
}

// TestNoRotation: with rotation off the certificate is used until it
// expires, then bootstrapped again.
func TestNoRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const life = 10 * time.Hour
		s := newSigner(t, life, func(int) outcome { return issue })
		m, _ := setup(t, s, false)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = m.Run(ctx); close(done) }()
		time.Sleep(life * 99 / 100)
		synctest.Wait()
		if s.count() != 1 {
			t.Fatalf("%d CSRs before expiry with rotation off", s.count())
		}
		time.Sleep(life * 2 / 100)
		synctest.Wait()
		if s.count() != 2 || !s.viaBoot[1] {
			t.Errorf("%d CSRs (bootstrap %v) after expiry: want a new bootstrap", s.count(), s.viaBoot)
		}
		cancel()
		<-done
	})
}

// countingHandler counts the records at Warn or above.
type countingHandler struct {
	mu    *sync.Mutex
	warns *int
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.mu.Lock()
		*h.warns++
		h.mu.Unlock()
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// TestBootstrapAPIDown: an unreachable API server is retried with
// back-off and logged once, not at every attempt.
func TestBootstrapAPIDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex // guards up and warns
		up, warns := false, 0
		s := newSigner(t, time.Hour, func(int) outcome {
			mu.Lock()
			defer mu.Unlock()
			if up {
				return issue
			}
			return down
		})
		m, dir := setup(t, s, true, slog.New(countingHandler{&mu, &warns}))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = m.Run(ctx); close(done) }()
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		mu.Lock()
		if warns != 1 {
			t.Errorf("%d warnings in 30 minutes of the same error, want 1", warns)
		}
		up = true
		mu.Unlock()
		time.Sleep(retryMax)
		synctest.Wait()
		if m.current.Load() == nil || fileSerial(t, dir) == "" {
			t.Error("no certificate once the API server answers")
		}
		cancel()
		<-done
	})
}
