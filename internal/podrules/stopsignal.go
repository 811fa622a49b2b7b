package podrules

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Stop signals (KEP-4960): containers[].lifecycle.stopSignal, validated as
// the API server of 1.33 to 1.36 does: it needs spec.os.name, and the
// signal must be one the named OS has. berth delivers it itself (see
// internal/kuberuntime/stopsignal.go), so it needs nothing of the runtime.
var (
	stopSignalsLinux = sets.New(
		v1.SIGABRT, v1.SIGALRM, v1.SIGBUS, v1.SIGCHLD, v1.SIGCLD, v1.SIGCONT, v1.SIGFPE, v1.SIGHUP,
		v1.SIGILL, v1.SIGINT, v1.SIGIO, v1.SIGIOT, v1.SIGKILL, v1.SIGPIPE, v1.SIGPOLL, v1.SIGPROF,
		v1.SIGPWR, v1.SIGQUIT, v1.SIGSEGV, v1.SIGSTKFLT, v1.SIGSTOP, v1.SIGSYS, v1.SIGTERM, v1.SIGTRAP,
		v1.SIGTSTP, v1.SIGTTIN, v1.SIGTTOU, v1.SIGURG, v1.SIGUSR1, v1.SIGUSR2, v1.SIGVTALRM, v1.SIGWINCH,
		v1.SIGXCPU, v1.SIGXFSZ, v1.SIGRTMIN, v1.SIGRTMINPLUS1, v1.SIGRTMINPLUS2, v1.SIGRTMINPLUS3,
		v1.SIGRTMINPLUS4, v1.SIGRTMINPLUS5, v1.SIGRTMINPLUS6, v1.SIGRTMINPLUS7, v1.SIGRTMINPLUS8,
		v1.SIGRTMINPLUS9, v1.SIGRTMINPLUS10, v1.SIGRTMINPLUS11, v1.SIGRTMINPLUS12, v1.SIGRTMINPLUS13,
		v1.SIGRTMINPLUS14, v1.SIGRTMINPLUS15, v1.SIGRTMAXMINUS14, v1.SIGRTMAXMINUS13, v1.SIGRTMAXMINUS12,
		v1.SIGRTMAXMINUS11, v1.SIGRTMAXMINUS10, v1.SIGRTMAXMINUS9, v1.SIGRTMAXMINUS8, v1.SIGRTMAXMINUS7,
		v1.SIGRTMAXMINUS6, v1.SIGRTMAXMINUS5, v1.SIGRTMAXMINUS4, v1.SIGRTMAXMINUS3, v1.SIGRTMAXMINUS2,
		v1.SIGRTMAXMINUS1, v1.SIGRTMAX)
	stopSignalsWindows = sets.New(v1.SIGKILL, v1.SIGTERM)
)

// validateStopSignal checks lifecycle.stopSignal against spec.os, with
// upstream's messages: forbidden without spec.os.name, else one of the
// OS's signals.
func validateStopSignal(sig v1.Signal, p *field.Path, os *v1.PodOS) field.ErrorList {
	switch {
	case os == nil:
		return field.ErrorList{field.Forbidden(p, "may not be set for containers with empty `spec.os.name`")}
	case os.Name == v1.Windows && !stopSignalsWindows.Has(sig):
		return field.ErrorList{field.NotSupported(p, sig, sets.List(stopSignalsWindows))}
	case os.Name == v1.Linux && !stopSignalsLinux.Has(sig):
		return field.ErrorList{field.NotSupported(p, sig, sets.List(stopSignalsLinux))}
	}
	return nil
}
