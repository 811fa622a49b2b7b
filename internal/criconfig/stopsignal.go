package criconfig

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criStopSignal is the CRI enum value of a Kubernetes signal name
// ("SIGRTMIN+1" is SIGNAL_SIGRTMINPLUS1), RUNTIME_DEFAULT for none.
func criStopSignal(sig *v1.Signal) runtimeapi.Signal {
	if sig == nil {
		return runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT
	}
	name := "SIGNAL_" + strings.NewReplacer("+", "PLUS", "-", "MINUS").Replace(string(*sig))
	return runtimeapi.Signal(runtimeapi.Signal_value[name])
}
