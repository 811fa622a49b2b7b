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

// BuildLocked makes sure dir (under CacheDir) holds every one of
// binaries, running build with a fresh directory to put them in when it
// does not; concurrent test binaries wait for one build (see buildLocked).
func BuildLocked(dir string, binaries []string, build func(out string) error) error {
	return buildLocked(dir, CacheDir(), binaries, build)
}

// DownloadModule fetches module@version into the module cache through the
// Go module proxy and returns its directory there.
func DownloadModule(module, version string) (string, error) {
	return downloadModule(module, version)
}

// Prepare makes sure the runtime name (as in Options.Containerd) is built
// and cached, building it when it is not, under the same lock a bed's
// Start takes; Debian's containerd needs nothing. `make testbed` runs it
// so a fresh machine's first e2e run does not spend its timeout on it.
func Prepare(name string) error {
	_, err := resolveContainerd(name, cacheDir())
	return err
}
