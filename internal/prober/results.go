package prober

import "fmt"

// Kind is a probe kind.
type Kind int

const (
	Liveness Kind = iota
	Readiness
	Startup
)

// kinds lists every kind, in the order workers are started.
var kinds = []Kind{Startup, Liveness, Readiness}

// String is the kind as the kubelet's events name it ("Liveness probe
// failed: ...").
func (k Kind) String() string {
	switch k {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// label is the kind as the kubelet's metrics label it.
func (k Kind) label() string {
	switch k {
	case Liveness:
		return "liveness"
	case Readiness:
		return "readiness"
	}
	return "startup"
}

// Result is the outcome of a probe, or the state a worker holds for its
// container.
type Result int8

const (
	// Unknown: not probed yet (a startup probe's initial state), or the
	// probe itself broke and its outcome says nothing of the container.
	Unknown Result = iota
	Success
	Failure
)

// String is the result as logs and tests print it.
func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return "Unknown"
}

// label is the result as the kubelet's probe metrics label it.
func (r Result) label() string {
	switch r {
	case Success:
		return "successful"
	case Failure:
		return "failed"
	}
	return "unknown"
}

// initialResult is what a worker reports for a container it has not probed
// yet, as the kubelet has it: not ready, alive, not started.
func initialResult(k Kind) Result {
	switch k {
	case Readiness:
		return Failure
	case Liveness:
		return Success
	}
	return Unknown
}

// resultKey names one result: the container run (runtime ID) and the kind.
type resultKey struct {
	containerID string
	kind        Kind
}
