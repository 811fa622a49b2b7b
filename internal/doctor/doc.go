// Package doctor is `berth doctor`: the preflight an operator runs before
// and after installing berth. Run checks, one line each, what berth needs
// from the machine (the runtime, its events, CNI, the pause image,
// cgroups, the manifest directory, no other agent on it, clock sync, free
// disk, the API socket, the cluster's API server with --kubeconfig) and,
// with Options.Run, starts and removes a pod-network sandbox. Each Result is OK, WARN or FAIL with the fix;
// Worst turns them into the exit status. FindOtherAgents is also what the
// daemon calls to refuse a manifest directory a kubelet or another berth
// already runs.
//
// It sits on the agent side: it imports the CRI transport (criclient), the
// manifest source's permission rule (source), the label berth marks
// runtime objects with (criconfig), the API client (kubeclient) and the
// node state the daemon serves (nodestatus), and must never be imported by the
// desired-state or runtime packages.
//
// It keeps no state between calls: each Run dials the runtime, checks and
// closes the connection; its results belong to the caller.
package doctor
