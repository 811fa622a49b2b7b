package handlers

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		port    intstr.IntOrString
		want    int
		wantErr bool
	}{
		{port: intstr.FromInt(80), want: 80},
		{port: intstr.FromString("http"), want: 8080},
		{port: intstr.FromString("9090"), want: 9090},
		{port: intstr.FromString("grpc"), wantErr: true},
		{port: intstr.FromInt(0), wantErr: true},
		{port: intstr.FromInt(70000), wantErr: true},
	}
	for _, tt := range tests {
		got, err := ResolvePort(tt.port, c)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ResolvePort(%s) = %d, %v; want %d, error %v", tt.port.String(), got, err, tt.want, tt.wantErr)
		}
	}
}

func TestNewHTTPGetRequest(t *testing.T) {
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		name    string
		action  v1.HTTPGetAction
		host    string
		url     string
		reqHost string
		ua      string
	}{
		{name: "defaults to the pod IP and /", action: v1.HTTPGetAction{Port: intstr.FromString("http")}, host: "10.88.0.4",
			url: "http://10.88.0.4:8080/", reqHost: "10.88.0.4:8080", ua: ProbeUserAgent},
		{name: "scheme, host, path and query", action: v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS, Host: "127.0.0.1", Path: "/healthz?full=1", Port: intstr.FromInt(443)},
			host: "10.88.0.4", url: "https://127.0.0.1:443/healthz?full=1", reqHost: "127.0.0.1:443", ua: ProbeUserAgent},
		{name: "headers override Host and User-Agent", host: "fd00::4", action: v1.HTTPGetAction{Port: intstr.FromInt(80), HTTPHeaders: []v1.HTTPHeader{
			{Name: "Host", Value: "svc.local"}, {Name: "User-Agent", Value: "mine"}}},
			url: "http://[fd00::4]:80/", reqHost: "svc.local", ua: "mine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := NewHTTPGetRequest(context.Background(), &tt.action, c, tt.host, ProbeUserAgent)
			if err != nil {
				t.Fatal(err)
			}
			if req.URL.String() != tt.url || req.Host != tt.reqHost || req.UserAgent() != tt.ua || req.Header.Get("Accept") != "*/*" {
				t.Errorf("request %s host %q UA %q Accept %q; want %s, %q, %q, */*", req.URL, req.Host, req.UserAgent(), req.Header.Get("Accept"), tt.url, tt.reqHost, tt.ua)
			}
		})
	}
	if _, err := NewHTTPGetRequest(context.Background(), &v1.HTTPGetAction{Port: intstr.FromInt(80)}, c, "", ProbeUserAgent); err == nil {
		t.Error("a request without any host was built")
	}
}
