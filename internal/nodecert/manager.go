package nodecert

import (
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
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/connrotation"

	"github.com/berth-agent/berth/internal/kubeclient"
	"github.com/berth-agent/berth/internal/statefile"
)

// SignerName is the signer of kubelet client certificates, whose CSRs
// kube-controller-manager's csrapproving controller approves for the
// bootstrap group (and for a node renewing its own).
const SignerName = "kubernetes.io/kube-apiserver-client-kubelet"

// CertFile is the name of the current key and certificate in the PKI
// directory, as the kubelet's (/var/lib/kubelet/pki).
const CertFile = "kubelet-client-current.pem"

// Bounds of a request and of the retries. A CSR nobody approves within
// requestTimeout is given up and a new one sent (the kubelet's certificate
// manager bounds its wait the same way); a failed request is retried after
// retryMin doubling to retryMax, jittered, so a fleet of nodes does not
// return to a recovering API server in step. The wait for the signature
// polls the CSR from pollMin doubling to pollMax.
const (
	requestTimeout = 15 * time.Minute
	retryMin       = time.Second
	retryMax       = 2 * time.Minute
	pollMin        = 500 * time.Millisecond
	pollMax        = 16 * time.Second
	callTimeout    = 10 * time.Second
)

// CSRClient is the part of the certificates/v1 API the manager uses.
type CSRClient interface {
	Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
}

// Config is what a Manager is built with.
type Config struct {
	// Kubeconfig is --kubeconfig: read if its certificate is valid,
	// (re)written after each certificate issued.
	Kubeconfig string
	// BootstrapKubeconfig is --bootstrap-kubeconfig: the credentials of
	// the first CSR, and of any after the node's certificate expired.
	BootstrapKubeconfig string
	// PKIDir is where CertFile is written (<root>/pki).
	PKIDir   string
	NodeName string
	// Rotate asks for the next certificate at 70-90% of the current
	// one's lifetime (rotateCertificates); false waits for it to expire
	// and bootstraps again.
	Rotate    bool
	UserAgent string
	// NewClient builds the CSR client over a REST config; nil is
	// internal/kubeclient's.
	NewClient func(*rest.Config) (CSRClient, error)
	Logger    *slog.Logger
}

// Manager holds the node's client certificate and renews it.
type Manager struct {
	cfg       Config
	bootstrap *rest.Config // the bootstrap credentials
	node      *rest.Config // the node's: present current
	server    *rest.Config // the cluster's server and CA, no credentials
	conns     *connrotation.ConnectionTracker
	log       *slog.Logger

	// current is the certificate the node's connections present; Run
	// alone stores it (after New), any handshake loads it.
	current atomic.Pointer[tls.Certificate]
}

// New reads the kubeconfigs and the current certificate, if any; it makes
// no request. The node's REST config presents whatever certificate is
// current at each new connection.
func New(cfg Config) (*Manager, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NewClient == nil {
		cfg.NewClient = func(rc *rest.Config) (CSRClient, error) {
			c, err := kubeclient.NewForConfig(rc)
			if err != nil {
				return nil, err
			}
			return c.CertificateSigningRequests(), nil
		}
	}
	bootstrap, err := clientcmd.BuildConfigFromFlags("", cfg.BootstrapKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read bootstrap kubeconfig %s: %w", cfg.BootstrapKubeconfig, err)
	}
	bootstrap.UserAgent = cfg.UserAgent
	m := &Manager{cfg: cfg, bootstrap: bootstrap, conns: connrotation.NewConnectionTracker(), log: cfg.Logger}
	m.server = withoutCredentials(bootstrap)
	if rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig); err == nil {
		if cert, err := loadClientCert(rc); err == nil && time.Now().Before(cert.Leaf.NotAfter) {
			m.current.Store(cert)
			m.server = withoutCredentials(rc)
		}
	}
	if m.current.Load() == nil {
		p := filepath.Join(cfg.PKIDir, CertFile)
		if cert, err := tls.LoadX509KeyPair(p, p); err == nil && time.Now().Before(cert.Leaf.NotAfter) {
			m.current.Store(&cert)
		}
	}
	if m.node, err = m.nodeConfig(); err != nil {
		return nil, err
	}
	return m, nil
}

// RESTConfig is the node's: the cluster of the kubeconfig (or of the
// bootstrap kubeconfig), presenting the current certificate. Until the
// first is issued its handshakes fail, saying so.
func (m *Manager) RESTConfig() *rest.Config { return rest.CopyConfig(m.node) }

// Expiry is when the current certificate expires; zero before the first
// is issued. Safe from any goroutine.
func (m *Manager) Expiry() time.Time {
	if c := m.current.Load(); c != nil && c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	return time.Time{}
}

// withoutCredentials keeps the server, its CA and the client settings.
func withoutCredentials(rc *rest.Config) *rest.Config {
	return &rest.Config{
		Host: rc.Host, APIPath: rc.APIPath, UserAgent: rc.UserAgent, Timeout: rc.Timeout, QPS: rc.QPS, Burst: rc.Burst,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure: rc.Insecure, ServerName: rc.ServerName, CAFile: rc.CAFile, CAData: rc.CAData,
		},
	}
}

// nodeConfig builds the node's REST config as the kubelet's
// UpdateTransport: the client certificate chosen at each handshake, and
// every connection tracked so a rotation can close them.
func (m *Manager) nodeConfig() (*rest.Config, error) {
	rc := rest.CopyConfig(m.server)
	tlsCfg, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, fmt.Errorf("TLS of %s: %w", rc.Host, err)
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := m.current.Load(); c != nil {
			return c, nil
		}
		return nil, errors.New("no client certificate yet: TLS bootstrap (--bootstrap-kubeconfig) has not been issued one")
	}
	d := connrotation.NewDialerWithTracker((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext, m.conns)
	rc.TLSClientConfig = rest.TLSClientConfig{}
	rc.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: 10 * time.Second, TLSClientConfig: tlsCfg,
		MaxIdleConnsPerHost: 25, DialContext: d.DialContext,
	})
	return rc, nil
}

// loadClientCert is the kubeconfig's client certificate and key.
func loadClientCert(rc *rest.Config) (*tls.Certificate, error) {
	certPEM, keyPEM := rc.CertData, rc.KeyData
	var err error
	if len(certPEM) == 0 && rc.CertFile != "" {
		if certPEM, err = os.ReadFile(rc.CertFile); err != nil {
			return nil, err
		}
	}
	if len(keyPEM) == 0 && rc.KeyFile != "" {
		if keyPEM, err = os.ReadFile(rc.KeyFile); err != nil {
			return nil, err
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

// Run gets a certificate if there is none, then renews it before it
// expires, until ctx ends. A failure is retried with jittered back-off,
// logged once per distinct error; the current certificate stays in use
// meanwhile.
func (m *Manager) Run(ctx context.Context) error {
	var lastErr string
	delay := time.Duration(0)
	for {
		wait := time.Duration(0)
		if c := m.current.Load(); c != nil && delay == 0 {
			wait = time.Until(m.renewAt(c.Leaf))
		} else if delay > 0 {
			wait = delay/2 + time.Duration(mrand.Int64N(int64(delay/2)+1))
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		err := m.renew(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if key := errorKey(err); key != lastErr {
				m.log.Warn("client certificate request failed; retrying with back-off", "err", err)
				lastErr = key
			}
			delay = min(max(2*delay, retryMin), retryMax)
			continue
		}
		if lastErr != "" {
			m.log.Info("client certificate request succeeded again")
		}
		lastErr, delay = "", 0
	}
}

// csrError is what became of one CSR; its name aside, the next CSR's
// error is the same.
type csrError struct{ name, msg string }

func (e *csrError) Error() string { return "CSR " + e.name + " " + e.msg }

// errorKey is what tells two failures apart for the log: a CSR's error
// without its name.
func errorKey(err error) string {
	if ce, ok := errors.AsType[*csrError](err); ok {
		return ce.msg
	}
	return err.Error()
}

// renewAt is when to ask for c's successor: at a random point of 70-90%
// of its lifetime, as the kubelet's certificate manager; at its expiry
// when rotation is off.
func (m *Manager) renewAt(c *x509.Certificate) time.Time {
	if !m.cfg.Rotate {
		return c.NotAfter
	}
	total := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(total) * (0.7 + 0.2*mrand.Float64())))
}

// renew sends a CSR, with the node's credentials while they are valid and
// the bootstrap ones otherwise, waits for its certificate, writes it and
// makes it current.
func (m *Manager) renew(ctx context.Context) error {
	rc, how := m.bootstrap, "bootstrap"
	if c := m.current.Load(); c != nil && time.Now().Before(c.Leaf.NotAfter) {
		rc, how = m.node, "rotation"
	}
	client, err := m.cfg.NewClient(rc)
	if err != nil {
		return fmt.Errorf("CSR client for %s: %w", how, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + m.cfg.NodeName, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return fmt.Errorf("make CSR: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	created, err := client.Create(cctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: SignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	cancel()
	if err != nil {
		return fmt.Errorf("create CSR (%s): %w", how, err)
	}
	m.log.Info("client certificate requested", "csr", created.Name, "credentials", how)
	certPEM, err := m.waitIssued(ctx, client, created)
	if err != nil {
		return err
	}
	cert, data, err := pair(certPEM, key)
	if err != nil {
		return &csrError{created.Name, err.Error()}
	}
	if err := m.write(data); err != nil {
		return err
	}
	m.current.Store(cert)
	// Open connections keep the certificate of their handshake; the
	// kubelet closes them so that every request presents the new one.
	m.conns.CloseAll()
	m.log.Info("client certificate issued", "csr", created.Name, "serial", cert.Leaf.SerialNumber.String(), "notAfter", cert.Leaf.NotAfter)
	return nil
}

// waitIssued polls the CSR with back-off until it carries a certificate,
// is denied or failed, or requestTimeout passes. Polling asks only for
// the `get` the bootstrapper role grants on CSRs, and survives an API
// server restart without a watch to re-establish; the back-off keeps it
// to a few requests a minute.
func (m *Manager) waitIssued(ctx context.Context, client CSRClient, created *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	poll := pollMin
	for {
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &csrError{created.Name, fmt.Sprintf("not issued within %s", requestTimeout)}
		case <-t.C:
		}
		poll = min(2*poll, pollMax)
		cctx, ccancel := context.WithTimeout(ctx, callTimeout)
		csr, err := client.Get(cctx, created.Name, metav1.GetOptions{})
		ccancel()
		if err != nil {
			continue // the API server may be restarting; the timeout bounds it
		}
		if csr.UID != created.UID {
			return nil, &csrError{created.Name, "replaced by another"}
		}
		for _, c := range csr.Status.Conditions {
			switch c.Type {
			case certificatesv1.CertificateDenied:
				return nil, &csrError{created.Name, fmt.Sprintf("denied: %s: %s", c.Reason, c.Message)}
			case certificatesv1.CertificateFailed:
				return nil, &csrError{created.Name, fmt.Sprintf("failed: %s: %s", c.Reason, c.Message)}
			}
		}
		if len(csr.Status.Certificate) > 0 {
			return csr.Status.Certificate, nil
		}
	}
}

// pair checks the issued certificate against key and the node and builds
// the file's content: the certificates, then the key.
func pair(certPEM []byte, key *ecdsa.PrivateKey) (*tls.Certificate, []byte, error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	data := append(append([]byte{}, certPEM...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	cert, err := tls.X509KeyPair(data, data)
	if err != nil {
		return nil, nil, fmt.Errorf("issued certificate: %w", err)
	}
	return &cert, data, nil
}

// write replaces the PKI file and the kubeconfig pointing at it, each
// atomically, the key file first so the kubeconfig never names a missing
// one.
func (m *Manager) write(data []byte) error {
	if err := os.MkdirAll(m.cfg.PKIDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", m.cfg.PKIDir, err)
	}
	if err := statefile.WriteAtomic(m.cfg.PKIDir, CertFile, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(m.cfg.PKIDir, CertFile), err)
	}
	path := filepath.Join(m.cfg.PKIDir, CertFile)
	cluster := &clientcmdapi.Cluster{Server: m.server.Host, CertificateAuthority: m.server.CAFile,
		CertificateAuthorityData: m.server.CAData, TLSServerName: m.server.ServerName, InsecureSkipTLSVerify: m.server.Insecure}
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"default-cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: path, ClientKey: path}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}},
		CurrentContext: "default-context",
	}
	b, err := clientcmd.Write(kc)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	if err := statefile.WriteAtomic(filepath.Dir(m.cfg.Kubeconfig), filepath.Base(m.cfg.Kubeconfig), b, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", m.cfg.Kubeconfig, err)
	}
	return nil
}
