package apiclient

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDialError: the errors a connect gets say what the operator can do.
// The cli package's tests provoke the missing, stale and hung sockets.
func TestDialError(t *testing.T) {
	// Permission errors cannot be provoked as root; the message is checked
	// on the error a non-root connect gets.
	c := New(Options{Socket: "/run/berth/berth.sock"})
	err := c.dialError(&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)})
	if want := "berth daemon not reachable at /run/berth/berth.sock: permission denied: the socket is mode 0660: run as root"; !strings.Contains(err.Error(), want) {
		t.Errorf("EACCES: %v, want %q", err, want)
	}
	err = c.dialError(errors.New("something else"))
	if err.Error() != "berth daemon not reachable at /run/berth/berth.sock: something else" {
		t.Errorf("other: %v", err)
	}
}

func TestResolvePod(t *testing.T) {
	mk := func(name, ns, node string) v1.Pod {
		return v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1.PodSpec{NodeName: node}}
	}
	pods := []v1.Pod{
		mk("web-node1", "default", "node1"),
		mk("web-2-node1", "default", "node1"),
		mk("dns-node1", "default", "node1"),
		mk("dns-node1", "kube-system", "node1"),
		mk("web", "default", "node1"),  // a manifest named web-node1 would collide; exact names win
		mk("bad-node1", "default", ""), // rejected: no spec, so no node name
		mk("bad-2-node1", "default", ""),
		mk("edited-node1", "default", "node1"), // two versions of one pod: the old one runs while the edit pulls
		mk("edited-node1", "default", "node1"),
	}
	tests := []struct {
		name, ns string
		want     string
		wantErr  string
	}{
		{"web-node1", "", "default/web-node1", ""},
		{"web", "", "default/web", ""},
		{"web-2", "", "default/web-2-node1", ""},
		{"dns", "kube-system", "kube-system/dns-node1", ""},
		{"dns", "", "", `pod "dns" is ambiguous: default/dns-node1, kube-system/dns-node1; pick one with -n NAMESPACE`},
		{"web-3", "", "", `pod "web-3" not found (berth pods lists them)`},
		{"bad", "", "default/bad-node1", ""},
		{"bad-2", "", "default/bad-2-node1", ""},
		{"edited", "", "default/edited-node1", ""},
	}
	for _, tt := range tests {
		p, err := ResolvePod(pods, tt.name, tt.ns)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || p.Namespace+"/"+p.Name != tt.want {
			t.Errorf("%s: %v %v, want %s", tt.name, p, err, tt.want)
		}
	}
}
