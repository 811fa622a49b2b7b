package controlplane

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BootstrapGroup is the group of kubeadm's default node bootstrap tokens,
// which kubeadm binds to the system:node-bootstrapper ClusterRole (create
// and read CSRs).
const BootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"

// BootstrapKubeconfig creates a bootstrap token as `kubeadm token create`
// does (a Secret bootstrap-token-ID in kube-system, for authentication, in
// BootstrapGroup), the ClusterRoleBinding kubeadm makes for that group,
// and writes a kubeconfig with the token: kubeadm join's
// bootstrap-kubelet.conf. The API server runs with
// --enable-bootstrap-token-auth.
func (cp *ControlPlane) BootstrapKubeconfig() (path, tokenID string, err error) {
	id, secret := randomToken(6), randomToken(16)
	token := &v1.Secret{
		TypeMeta:   metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system"},
		Type:       "bootstrap.kubernetes.io/token",
		StringData: map[string]string{
			"token-id": id, "token-secret": secret,
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
			"auth-extra-groups": BootstrapGroup,
			"expiration":        time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		},
	}
	if err := cp.create("/api/v1/namespaces/kube-system/secrets", token); err != nil {
		return "", "", err
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{Kind: "ClusterRoleBinding", APIVersion: "rbac.authorization.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:kubelet-bootstrap"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: BootstrapGroup}},
	}
	if err := cp.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding); err != nil {
		return "", "", err
	}
	path = filepath.Join(cp.dir, "bootstrap-kubelet-"+id+".conf")
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: tls-bootstrap-token-user
  user:
    token: %s.%s
contexts:
- name: tls-bootstrap-token-user@e2e
  context:
    cluster: e2e
    user: tls-bootstrap-token-user
current-context: tls-bootstrap-token-user@e2e
`, cp.URL, cp.ca.certFile(), id, secret)
	return path, id, os.WriteFile(path, []byte(text), 0o600)
}

// create POSTs obj as the admin; an object that exists already is kept.
func (cp *ControlPlane) create(path string, obj any) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	resp, err := cp.client.Post(cp.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusConflict {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return fmt.Errorf("create %s: %s: %s", path, resp.Status, msg)
}

// randomToken is n characters of [a-z0-9], a bootstrap token's alphabet.
func randomToken(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

// SignCSR signs a PEM CSR with the cluster's CA as a client certificate
// valid from now for lifetime, as kube-controller-manager's csrsigning
// controller does for kubernetes.io/kube-apiserver-client-kubelet (which
// this control plane does not run), and returns it as PEM.
func (cp *ControlPlane) SignCSR(request []byte, lifetime time.Duration) ([]byte, error) {
	block, _ := pem.Decode(request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("the request is no PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: req.Subject, NotBefore: now, NotAfter: now.Add(lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, cp.ca.cert, req.PublicKey, cp.ca.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
