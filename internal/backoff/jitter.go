package backoff

import "time"

// Jittered is the wait after failures consecutive failures of a loop that
// retries on its own schedule: initial doubled per failure up to max, and
// of that a random half to all (u is uniform in [0, 1)), so that many
// nodes failing together do not retry in step.
func Jittered(initial, max time.Duration, failures int, u float64) time.Duration {
	base := max
	if failures < 63 && initial <= max>>failures {
		base = initial << failures
	}
	return base/2 + time.Duration(float64(base/2)*u)
}
