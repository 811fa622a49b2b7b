package testbed

// ImageArchive returns the OCI layout tarball of the busybox (BusyboxRef)
// and pause (PauseRef) images, built from the host's static busybox and
// cached like a bed's own. It lets a runtime that is not a Bed's (the one
// e2e/systemdbed boots inside a systemd container) import the same images.
func ImageArchive() (string, error) {
	return imageArchive(CacheDir(), "/usr/bin/busybox")
}

// CacheDir is where the test beds keep what they build between runs:
// $BERTH_TESTBED_CACHE, else the user's cache dir.
func CacheDir() string { return cacheDir() }
