package criconfig

import "testing"

func TestNormalizedName(t *testing.T) {
	tests := []struct {
		image, want string
		wantErr     bool
	}{
		{image: "busybox", want: "docker.io/library/busybox:latest"},
		{image: "busybox:1.36", want: "docker.io/library/busybox:1.36"},
		{image: "library/busybox:1.36", want: "docker.io/library/busybox:1.36"},
		{image: "example.com/app:1", want: "example.com/app:1"},
		{image: "localhost:5000/app", want: "localhost:5000/app:latest"},
		{image: "app@sha256:" + sixtyFour, want: "docker.io/library/app@sha256:" + sixtyFour},
		{image: "app:1@sha256:" + sixtyFour, want: "docker.io/library/app:1@sha256:" + sixtyFour},
		{image: "UPPER", wantErr: true},
	}
	for _, tt := range tests {
		got, err := NormalizedName(tt.image)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("NormalizedName(%q) = %q, %v; want %q (error %v)", tt.image, got, err, tt.want, tt.wantErr)
		}
	}
}

const sixtyFour = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
