// Package nodecert gets and renews the node's client certificate as the
// kubelet's TLS bootstrap does (--bootstrap-kubeconfig, rotateCertificates):
// with the bootstrap credentials it sends a CertificateSigningRequest for
// the signer kubernetes.io/kube-apiserver-client-kubelet, waits for the
// certificate, writes key and certificate to <root>/pki and the
// kubeconfig at --kubeconfig, and before the certificate expires asks for
// the next one with the current credentials.
//
// It owns the node's credentials: the files it writes and the certificate
// the node's API connections present (Manager.current, an atomic pointer
// written by Manager.Run alone). It imports internal/kubeclient (the CSR
// calls) and internal/statefile (atomic writes), and never the desired
// state or the runtime.
package nodecert
