package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/berth-agent/berth/internal/backoff"
	"github.com/berth-agent/berth/internal/podspec"
)

// AnnotationMirror marks a mirror pod; its value is the static pod's
// config hash (the kubelet's kubernetes.io/config.mirror).
const AnnotationMirror = "kubernetes.io/config.mirror"

// The schedule of the mirror pods.
const (
	// checkPeriod is how often the pods are compared with their mirrors:
	// a change of status reaches the API server within it.
	checkPeriod = 2 * time.Second
	// relistPeriod is how often the node's pods are listed again from
	// the API server, so a mirror pod deleted or changed by someone else
	// is put back.
	relistPeriod = time.Minute
	// requestTimeout bounds each call to the API server.
	requestTimeout = 10 * time.Second
	// The back-off after a failed round, from checkPeriod doubling to
	// backoffMax, with equal jitter.
	backoffMax = 2 * time.Minute
)

// PodClient reaches the Pods of a namespace: client-go's typed Pods
// client, or kubeclient's.
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error)
	Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error)
}

// NodeGetter reads the Node, for its UID.
type NodeGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
}

// Config configures the mirror pods.
type Config struct {
	// Pods returns the client of a namespace's pods ("" for all).
	Pods     func(namespace string) PodClient
	Nodes    NodeGetter
	NodeName string
	// Event records an event of a pod (its reason and message); it must
	// not block. nil records none.
	Event func(pod *v1.Pod, reason, message string)
	// Rand returns uniform numbers in [0, 1) for the jitter; nil is
	// math/rand/v2.
	Rand    func() float64
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics prometheus.Registerer
}

// Mirrorer keeps the mirror pods of the static pods that snapshot returns
// (each pod as berth runs it, with its current status). It runs in its own
// goroutine, so an API server that is down or slow never holds up pods.
type Mirrorer struct {
	cfg      Config
	pods     func(namespace string) PodClient
	nodes    NodeGetter
	clock    clock.Clock
	log      *slog.Logger
	snapshot func() Snapshot
	errors   *prometheus.CounterVec
	count    prometheus.Gauge

	// Owned by the goroutine in Run.
	mirrors  map[string]*mirrorPod // by full name; valid once listed
	listed   time.Time             // when mirrors was last listed; zero lists again
	nodeUID  types.UID             // the Node's, for ownerReferences; "" reads it again
	told     map[types.UID]bool    // pods whose missing mirror was recorded as an event
	failures int
	lastErr  string
}

// mirrorPod is a mirror pod as the API server has it.
type mirrorPod struct {
	uid    types.UID
	hash   string
	status v1.PodStatus // as the API server last returned it
	// sent is the JSON of the status last written (or listed): the API
	// server keeps times to the second, so the status it returns never
	// equals berth's, and the comparison is on what goes on the wire.
	sent []byte
}

// Snapshot is what the agent runs, for the mirrors.
type Snapshot struct {
	// Pods are the pods berth runs, each with its current status; a pod
	// not synced yet has an empty one (no phase) and waits for it.
	Pods []*v1.Pod
	// Complete says every source delivered: until then a mirror whose pod
	// is missing may be of a pod not read yet, and is kept.
	Complete bool
}

// New builds the mirrorer; snapshot must be safe to call from its
// goroutine and return pods it may read but never writes.
func New(cfg Config, snapshot func() Snapshot) *Mirrorer {
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if cfg.Event == nil {
		cfg.Event = func(*v1.Pod, string, string) {}
	}
	m := &Mirrorer{
		cfg:      cfg,
		pods:     cfg.Pods,
		nodes:    cfg.Nodes,
		clock:    cfg.Clock,
		log:      cfg.Logger.With("node", cfg.NodeName),
		snapshot: snapshot,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_mirror_pod_errors_total", Help: "Failed calls to the API server for mirror pods, by operation (list, create, delete, status).",
		}, []string{"op"}),
		count: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_mirror_pods", Help: "Mirror pods of this node in the API server, as berth last saw them.",
		}),
		told: map[types.UID]bool{},
	}
	cfg.Metrics.MustRegister(m.errors, m.count)
	return m
}

// Run keeps the mirror pods until ctx is done; after a failed round it
// retries with back-off.
func (m *Mirrorer) Run(ctx context.Context) {
	for {
		wait := m.step(ctx)
		t := m.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// step makes one round and returns how long to wait before the next.
func (m *Mirrorer) step(ctx context.Context) time.Duration {
	err := m.round(ctx)
	if ctx.Err() != nil {
		return 0
	}
	if err != nil {
		m.failures++
		if err.Error() != m.lastErr {
			m.log.Warn("API server: mirror pods not up to date; retrying with back-off (pods are not affected)", "err", err)
		}
		m.lastErr = err.Error()
		return backoff.Jittered(checkPeriod, backoffMax, m.failures, m.cfg.Rand())
	}
	if m.lastErr != "" {
		m.log.Info("API server: mirror pods up to date again")
	}
	m.failures, m.lastErr = 0, ""
	return checkPeriod
}

// round lists the node's mirror pods when due, then brings each pod's
// mirror in line with it: created, replaced when its hash changed, its
// status patched; and, once every source delivered, deletes the mirrors
// of pods berth no longer runs (at the start too: those of pods removed
// while berth was down). A restarted berth keeps the mirrors of the pods
// it still runs: their hash is the same.
func (m *Mirrorer) round(ctx context.Context) error {
	if m.listed.IsZero() || m.clock.Since(m.listed) >= relistPeriod {
		if err := m.list(ctx); err != nil {
			m.errors.WithLabelValues("list").Inc()
			return fmt.Errorf("list the mirror pods of node %s: %w", m.cfg.NodeName, err)
		}
	}
	snap := m.snapshot()
	var errs []error
	want := make(map[string]bool, len(snap.Pods))
	running := make(map[types.UID]bool, len(snap.Pods))
	for _, p := range snap.Pods {
		running[p.UID] = true
		if msg := Unmirrorable(p); msg != "" {
			if !m.told[p.UID] {
				m.told[p.UID] = true
				m.cfg.Event(p, ReasonNodeRestriction, msg)
			}
			continue
		}
		fn := podspec.FullName(p)
		want[fn] = true
		if p.Status.Phase == "" {
			continue // not synced yet: its mirror, if any, is kept as it is
		}
		if err := m.sync(ctx, fn, p); err != nil {
			errs = append(errs, err)
		}
	}
	for uid := range m.told {
		if !running[uid] {
			delete(m.told, uid)
		}
	}
	for fn, mp := range m.mirrors {
		if want[fn] || !snap.Complete {
			continue
		}
		if err := m.delete(ctx, fn, mp); err != nil {
			errs = append(errs, err)
		}
	}
	m.count.Set(float64(len(m.mirrors)))
	if len(errs) > 0 {
		// What the API server has is uncertain: read it again.
		m.listed = time.Time{}
	}
	return errors.Join(errs...)
}

// list reads the node's mirror pods.
func (m *Mirrorer) list(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	sel := fields.OneTermEqualSelector("spec.nodeName", m.cfg.NodeName).String()
	list, err := m.pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return err
	}
	mirrors := map[string]*mirrorPod{}
	for i := range list.Items {
		p := &list.Items[i]
		hash, ok := p.Annotations[AnnotationMirror]
		if !ok || p.Spec.NodeName != m.cfg.NodeName {
			continue
		}
		sent, _ := json.Marshal(p.Status)
		mirrors[podspec.FullName(p)] = &mirrorPod{uid: p.UID, hash: hash, status: p.Status, sent: sent}
	}
	m.mirrors, m.listed = mirrors, m.clock.Now()
	return nil
}

// sync brings the mirror of pod (full name fn) in line with it.
func (m *Mirrorer) sync(ctx context.Context, fn string, pod *v1.Pod) error {
	hash := pod.Annotations[podspec.AnnotationHash]
	mp := m.mirrors[fn]
	if mp != nil && mp.hash != hash {
		if err := m.delete(ctx, fn, mp); err != nil {
			return err
		}
		mp = nil
	}
	if mp == nil {
		created, err := m.create(ctx, pod, hash)
		if err != nil {
			m.errors.WithLabelValues("create").Inc()
			return fmt.Errorf("create mirror pod %s: %w", fn, err)
		}
		mp = &mirrorPod{uid: created.UID, hash: hash, status: created.Status}
		m.mirrors[fn] = mp
		m.log.Info("mirror pod created", "pod", pod.Name, "namespace", pod.Namespace, "uid", pod.UID, "mirrorUID", created.UID)
	}
	if err := m.patchStatus(ctx, pod, mp); err != nil {
		m.errors.WithLabelValues("status").Inc()
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			// Deleted, or another pod of the name: create it anew.
			delete(m.mirrors, fn)
		}
		return fmt.Errorf("update the status of mirror pod %s: %w", fn, err)
	}
	return nil
}

// create makes pod's mirror pod: a copy with the mirror annotation, the
// node name and exactly one ownerReference, to the Node as a controller,
// which NodeRestriction requires and which lets the garbage collector
// remove it with the Node. A mirror of the same hash already there is
// taken as it is.
func (m *Mirrorer) create(ctx context.Context, pod *v1.Pod, hash string) (*v1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if m.nodeUID == "" {
		node, err := m.nodes.Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read node %s for the owner reference: %w", m.cfg.NodeName, err)
		}
		m.nodeUID = node.UID
	}
	mp := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        pod.Name,
			Namespace:   pod.Namespace,
			Labels:      maps.Clone(pod.Labels),
			Annotations: map[string]string{AnnotationMirror: hash},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: m.cfg.NodeName, UID: m.nodeUID, Controller: ptr.To(true),
			}},
		},
		Spec: *pod.Spec.DeepCopy(),
	}
	for k, v := range pod.Annotations {
		if k != AnnotationMirror {
			mp.Annotations[k] = v
		}
	}
	mp.Spec.NodeName = m.cfg.NodeName
	pods := m.pods(pod.Namespace)
	created, err := pods.Create(ctx, mp, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if gerr == nil && existing.Annotations[AnnotationMirror] == hash && existing.DeletionTimestamp == nil {
			return existing, nil
		}
	}
	if apierrors.IsForbidden(err) {
		// The Node may have been re-created: its UID is read again.
		m.nodeUID = ""
	}
	return created, err
}

// delete removes mirror mp (full name fn) with a UID precondition, so a
// pod of the same name created since is never touched.
func (m *Mirrorer) delete(ctx context.Context, fn string, mp *mirrorPod) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	ns, name := splitFullName(fn)
	err := m.pods(ns).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &mp.uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		m.errors.WithLabelValues("delete").Inc()
		return fmt.Errorf("delete mirror pod %s: %w", fn, err)
	}
	delete(m.mirrors, fn)
	m.log.Info("mirror pod deleted", "pod", name, "namespace", ns, "mirrorUID", mp.uid)
	return nil
}

// patchStatus patches the mirror's status to pod's when they differ: a
// JSON merge patch from the status the API server has (fields gone are
// set to null, lists replaced whole), carrying the mirror's UID, which the
// API server refuses to change: the UID precondition of the kubelet's
// status manager.
func (m *Mirrorer) patchStatus(ctx context.Context, pod *v1.Pod, mp *mirrorPod) error {
	status := pod.Status
	if mp.status.QOSClass != "" {
		// The API server sets the QoS class at creation, from the same
		// spec, and refuses to change it.
		status.QOSClass = mp.status.QOSClass
	}
	sent, err := json.Marshal(status)
	if err != nil {
		return err
	}
	if bytes.Equal(sent, mp.sent) {
		return nil
	}
	var old, updated map[string]any
	if err := unmarshalStatus(mp.status, &old); err != nil {
		return err
	}
	if err := json.Unmarshal(sent, &updated); err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": mp.uid},
		"status":   mergePatch(old, updated),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	patched, err := m.pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return err
	}
	mp.status, mp.sent = patched.Status, sent
	return nil
}

func unmarshalStatus(st v1.PodStatus, into *map[string]any) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// mergePatch is the RFC 7386 merge patch from old to updated: updated's
// values where they differ, objects patched key by key, null for a key
// updated lacks.
func mergePatch(old, updated map[string]any) map[string]any {
	patch := map[string]any{}
	for k, nv := range updated {
		ov, ok := old[k]
		om, oldIsObj := ov.(map[string]any)
		nm, newIsObj := nv.(map[string]any)
		switch {
		case ok && oldIsObj && newIsObj:
			if sub := mergePatch(om, nm); len(sub) > 0 {
				patch[k] = sub
			}
		case !ok || !reflect.DeepEqual(ov, nv):
			patch[k] = nv
		}
	}
	for k := range old {
		if _, ok := updated[k]; !ok {
			patch[k] = nil
		}
	}
	return patch
}

// splitFullName undoes podspec.JoinFullName (name_namespace); a name
// cannot hold "_".
func splitFullName(fn string) (namespace, name string) {
	for i := len(fn) - 1; i >= 0; i-- {
		if fn[i] == '_' {
			return fn[i+1:], fn[:i]
		}
	}
	return "", fn
}
