// Package runtimewatchtest makes runtime objects labelled as berth labels
// its pods, for the tests of the packages that read, kill or remove them:
// sandboxes and containers on the cri-api's fake runtime, and pods started
// on a real runtime for end-to-end tests.
//
// Only tests import it. It must never import the runtime manager, the
// desired-state packages nor the agent. It owns no mutable state: what it
// makes belongs to the test that asked.
package runtimewatchtest
