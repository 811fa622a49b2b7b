package testbed

import (
	"strings"
	"testing"
)

func TestCheckSocketRoom(t *testing.T) {
	tests := []struct {
		dir     string
		wantErr bool
	}{
		{dir: "/tmp/berth-testbed-0123456789"},
		{dir: "/work/main/.testbed"},
		{dir: "/" + strings.Repeat("d", 100), wantErr: true},
		// "/" + 84 bytes + "/containerd.sock.ttrpc" is 107 bytes, the most
		// a socket path can hold with its NUL in 108.
		{dir: "/" + strings.Repeat("d", 84)},
		{dir: "/" + strings.Repeat("d", 85), wantErr: true},
	}
	for _, tc := range tests {
		if err := checkSocketRoom(tc.dir); (err != nil) != tc.wantErr {
			t.Errorf("checkSocketRoom(%d-byte dir) = %v, want error %v", len(tc.dir), err, tc.wantErr)
		}
	}
}
