package kubeclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

type request struct {
	method, path, query, contentType, body string
}

// TestRequestsAsTheTypedClients checks each call's method, path, query and
// body against what the API server expects (client-go's typed clients'),
// and that API errors come back as typed StatusErrors.
func TestRequestsAsTheTypedClients(t *testing.T) {
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(body)})
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/status"):
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonConflict, Code: http.StatusConflict, Message: "the object has been modified"})
		case strings.HasPrefix(r.URL.Path, "/apis/coordination.k8s.io/"):
			_ = json.NewEncoder(w).Encode(coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
				ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "7"}})
		case strings.HasSuffix(r.URL.Path, "/pods"):
			_ = json.NewEncoder(w).Encode(v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p"}}}})
		case strings.Contains(r.URL.Path, "/pods/"):
			_ = json.NewEncoder(w).Encode(v1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}})
		default:
			_ = json.NewEncoder(w).Encode(v1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}})
		}
	}))
	defer srv.Close()
	c, err := NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, err := c.Nodes().Get(ctx, "n1", metav1.GetOptions{ResourceVersion: "0"})
	if err != nil || n.UID != "uid-1" {
		t.Fatalf("Get node = %+v, %v", n, err)
	}
	if _, err := c.Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("UpdateStatus error = %v, want a conflict", err)
	}
	l, err := c.Leases("kube-node-lease").Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "6"}}, metav1.UpdateOptions{})
	if err != nil || l.ResourceVersion != "7" {
		t.Errorf("Update lease = %+v, %v", l, err)
	}
	list, err := c.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("List pods = %+v, %v", list, err)
	}
	if _, err := c.Pods("default").Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{"metadata":{"uid":"u1"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("Patch = %v", err)
	}
	uid := types.UID("u1")
	if err := c.Pods("default").Delete(ctx, "p", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		t.Errorf("Delete = %v", err)
	}
	want := []request{
		{method: "GET", path: "/api/v1/nodes/n1", query: "resourceVersion=0"},
		{method: "PUT", path: "/api/v1/nodes/n1/status", contentType: "application/json"},
		{method: "PUT", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", contentType: "application/json"},
		{method: "GET", path: "/api/v1/pods", query: "fieldSelector=spec.nodeName%3Dn1"},
		{method: "PATCH", path: "/api/v1/namespaces/default/pods/p/status", contentType: "application/strategic-merge-patch+json"},
		{method: "DELETE", path: "/api/v1/namespaces/default/pods/p", contentType: "application/json"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.method != w.method || g.path != w.path || g.query != w.query || g.contentType != w.contentType {
			t.Errorf("request %d = %s %s?%s (%s), want %s %s?%s (%s)", i, g.method, g.path, g.query, g.contentType, w.method, w.path, w.query, w.contentType)
		}
	}
	if !strings.Contains(got[1].body, `"resourceVersion"`) && !strings.Contains(got[1].body, `"name":"n1"`) {
		t.Errorf("status update body = %s", got[1].body)
	}
	if !strings.Contains(got[5].body, `"preconditions":{"uid":"u1"}`) {
		t.Errorf("delete body %s has no UID precondition", got[5].body)
	}
}

// TestCSRRequests checks the certificates/v1 calls' paths: create, get and
// the approval and status subresources.
func TestCSRRequests(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(certificatesv1.CertificateSigningRequest{
			TypeMeta:   metav1.TypeMeta{Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "csr-1", UID: "u1"},
			Status:     certificatesv1.CertificateSigningRequestStatus{Certificate: []byte("cert")},
		})
	}))
	defer srv.Close()
	c, err := NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	csrs := c.CertificateSigningRequests()
	created, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"}}, metav1.CreateOptions{})
	if err != nil || created.Name != "csr-1" {
		t.Fatalf("Create = %+v, %v", created, err)
	}
	if g, err := csrs.Get(ctx, "csr-1", metav1.GetOptions{}); err != nil || string(g.Status.Certificate) != "cert" {
		t.Fatalf("Get = %+v, %v", g, err)
	}
	if _, err := csrs.UpdateApproval(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := csrs.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const base = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	want := []string{"POST " + base, "GET " + base + "/csr-1", "PUT " + base + "/csr-1/approval", "PUT " + base + "/csr-1/status"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
