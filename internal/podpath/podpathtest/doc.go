// Package podpathtest gives tests of code that builds paths from pod or
// runtime fields (kuberuntime, gc) a place to prove nothing escapes its
// root.
//
// It is imported by tests only and must never import another berth
// package.
//
// It keeps no mutable state of its own: each check works in the test's
// temporary directories.
package podpathtest
