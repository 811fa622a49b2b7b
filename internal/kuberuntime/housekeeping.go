package kuberuntime

// ForgetStaleBackoffs drops image-pull and crash-loop back-off entries that
// have been quiet for twice their maximum delay, so the keys of pods and
// images long gone do not accumulate over years of uptime. The agent calls
// it from its housekeeping.
func (m *Manager) ForgetStaleBackoffs() {
	m.pullBackoff.GC()
	m.crashBackoff.GC()
	m.sandboxNameBackoff.GC()
}
