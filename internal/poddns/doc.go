// Package poddns makes a pod sandbox's DNS config as the kubelet does:
// the effective dnsPolicy, the host's resolver file, cluster DNS and the
// pod's dnsConfig merged, within the resolver's limits.
//
// It is a leaf: it must never import another berth package.
//
// It keeps no mutable state: a Config is a value, and the host's resolver
// file is read afresh for each pod.
package poddns
