package kubeclient

import "testing"

func TestServerAddressHasNoCredentials(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"https://10.0.0.1:6443", "https://10.0.0.1:6443"},
		{"https://admin:s3cret@10.0.0.1:6443/prefix", "https://10.0.0.1:6443/prefix"},
		{"10.0.0.1:6443", "10.0.0.1:6443"},
		{"admin:s3cret@10.0.0.1:6443", "10.0.0.1:6443"},
	} {
		if got := serverAddress(tc.host); got != tc.want {
			t.Errorf("serverAddress(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}
