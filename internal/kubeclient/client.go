package kubeclient

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client reaches the API server with one kubeconfig's credentials.
type Client struct {
	core, coordination, certificates *rest.RESTClient
	params                           runtime.ParameterCodec
	server                           string // the API server's address, no credentials
}

// New reads kubeconfig (as the kubelet's --kubeconfig) and builds the
// client; it makes no request.
func New(kubeconfig, userAgent string) (*Client, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig %s: %w", kubeconfig, err)
	}
	rc.UserAgent = userAgent
	return NewForConfig(rc)
}

// NewForConfig builds the client from a REST config.
func NewForConfig(rc *rest.Config) (*Client, error) {
	sch := runtime.NewScheme()
	if err := v1.AddToScheme(sch); err != nil {
		return nil, err
	}
	if err := coordinationv1.AddToScheme(sch); err != nil {
		return nil, err
	}
	if err := certificatesv1.AddToScheme(sch); err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(sch)
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	group := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(rc)
		c.GroupVersion, c.APIPath = &gv, apiPath
		c.NegotiatedSerializer = codecs.WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		rcl, err := rest.RESTClientForConfigAndClient(c, hc)
		if err != nil {
			return nil, fmt.Errorf("API client for %s: %w", gv, err)
		}
		return rcl, nil
	}
	core, err := group(v1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	coord, err := group(coordinationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	certs, err := group(certificatesv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return &Client{core: core, coordination: coord, certificates: certs, params: runtime.NewParameterCodec(sch), server: serverAddress(rc.Host)}, nil
}

// Server is the API server's address the client reaches, without any user
// information the kubeconfig's URL may carry: it is shown to the node's
// administrator and must not leak credentials.
func (c *Client) Server() string { return c.server }

func serverAddress(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		// A bare host[:port], as rest.Config allows.
		if i := strings.LastIndex(host, "@"); i >= 0 {
			return host[i+1:]
		}
		return host
	}
	u.User = nil
	return u.String()
}

// Nodes are the cluster's Nodes.
func (c *Client) Nodes() Resource[*v1.Node] {
	return Resource[*v1.Node]{c: c.core, params: c.params, resource: "nodes", newObj: func() *v1.Node { return &v1.Node{} }}
}

// Leases are the Leases of namespace.
func (c *Client) Leases(namespace string) Resource[*coordinationv1.Lease] {
	return Resource[*coordinationv1.Lease]{c: c.coordination, params: c.params, namespace: namespace, resource: "leases",
		newObj: func() *coordinationv1.Lease { return &coordinationv1.Lease{} }}
}

// Pods are the Pods of namespace ("" for every namespace).
func (c *Client) Pods(namespace string) Pods {
	return Pods{Resource[*v1.Pod]{c: c.core, params: c.params, namespace: namespace, resource: "pods", newObj: func() *v1.Pod { return &v1.Pod{} }}}
}

// CertificateSigningRequests are the cluster's CSRs (TLS bootstrap and
// the rotation of the node's client certificate).
func (c *Client) CertificateSigningRequests() CSRs {
	return CSRs{Resource[*certificatesv1.CertificateSigningRequest]{c: c.certificates, params: c.params, resource: "certificatesigningrequests",
		newObj: func() *certificatesv1.CertificateSigningRequest { return &certificatesv1.CertificateSigningRequest{} }}}
}

// Object is an API object of a Resource.
type Object interface {
	runtime.Object
	GetName() string
}

// Resource is one resource of one namespace, with the methods of
// client-go's typed clients of the same name.
type Resource[T Object] struct {
	c         *rest.RESTClient
	params    runtime.ParameterCodec
	namespace string
	resource  string
	newObj    func() T
}

// req scopes a request to the resource (and its namespace, if any).
func (r Resource[T]) req(req *rest.Request) *rest.Request {
	if r.namespace != "" {
		req = req.Namespace(r.namespace)
	}
	return req.Resource(r.resource)
}

func (r Resource[T]) into(res rest.Result) (T, error) {
	obj := r.newObj()
	if err := res.Into(obj); err != nil {
		var zero T
		return zero, err
	}
	return obj, nil
}

// Get reads the object name.
func (r Resource[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	return r.into(r.req(r.c.Get()).Name(name).VersionedParams(&opts, r.params).Do(ctx))
}

// Create creates obj.
func (r Resource[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	return r.into(r.req(r.c.Post()).VersionedParams(&opts, r.params).Body(obj).Do(ctx))
}

// Update replaces obj, with its resourceVersion as the precondition.
func (r Resource[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return r.into(r.req(r.c.Put()).Name(obj.GetName()).VersionedParams(&opts, r.params).Body(obj).Do(ctx))
}

// UpdateStatus replaces obj's status, with its resourceVersion as the
// precondition.
func (r Resource[T]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return r.into(r.req(r.c.Put()).Name(obj.GetName()).SubResource("status").VersionedParams(&opts, r.params).Body(obj).Do(ctx))
}

// Delete deletes the object name.
func (r Resource[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.req(r.c.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

// Patch patches the object name (or its subresource).
func (r Resource[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	return r.into(r.req(r.c.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, r.params).Body(data).Do(ctx))
}

// Pods are the Pods of a namespace, listed as well.
type Pods struct{ Resource[*v1.Pod] }

// List lists the pods opts selects.
func (p Pods) List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error) {
	list := &v1.PodList{}
	err := p.req(p.c.Get()).VersionedParams(&opts, p.params).Do(ctx).Into(list)
	return list, err
}

// CSRs are the CertificateSigningRequests, with their approval.
type CSRs struct {
	Resource[*certificatesv1.CertificateSigningRequest]
}

// UpdateApproval replaces csr's approval conditions (the approval
// subresource), as an approver does.
func (r CSRs) UpdateApproval(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.UpdateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	return r.into(r.req(r.c.Put()).Name(csr.Name).SubResource("approval").VersionedParams(&opts, r.params).Body(csr).Do(ctx))
}

// Readyz asks the API server's /readyz and returns nil when it answers ok.
func (c *Client) Readyz(ctx context.Context) error {
	body, err := c.core.Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET %s/readyz: %w", c.server, err)
	}
	if s := strings.TrimSpace(string(body)); s != "ok" {
		return fmt.Errorf("GET %s/readyz: answered %q", c.server, s)
	}
	return nil
}
