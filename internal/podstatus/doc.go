// Package podstatus is the v1 status of berth's pods: it derives a pod's
// phase, container statuses and conditions from what the runtime reports
// (as the kubelet's generateAPIPodStatus does), renders berth's
// ConditionManifestValid, and keeps the latest status of every pod in the
// Store that the API, the CLI, metrics and sd_notify read.
//
// It owns the pods' statuses. It must never import the sync loop, the pod
// workers or the merge store: Build is a pure function of its Input. The
// Store is written by the pod workers (and by the sync loop only for pods
// it holds back before they have a lane); its pods are guarded by the
// Store's lock and never modified once stored.
package podstatus
