package criconfig

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCRIStopSignal(t *testing.T) {
	sig := func(s v1.Signal) *v1.Signal { return &s }
	tests := []struct {
		in   *v1.Signal
		want runtimeapi.Signal
	}{
		{nil, runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT},
		{sig(v1.SIGUSR1), runtimeapi.Signal_SIGNAL_SIGUSR1},
		{sig(v1.SIGRTMINPLUS1), runtimeapi.Signal_SIGNAL_SIGRTMINPLUS1},
		{sig(v1.SIGRTMAXMINUS14), runtimeapi.Signal_SIGNAL_SIGRTMAXMINUS14},
		{sig(v1.SIGRTMAX), runtimeapi.Signal_SIGNAL_SIGRTMAX},
	}
	for _, tt := range tests {
		if got := criStopSignal(tt.in); got != tt.want {
			t.Errorf("criStopSignal(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
