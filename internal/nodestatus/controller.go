package nodestatus

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/berth-agent/berth/internal/backoff"
)

// The kubelet's schedule, which the control plane's node lifecycle
// controller expects.
const (
	// LeaseNamespace holds every node's Lease.
	LeaseNamespace = "kube-node-lease"
	// leaseDuration is the Lease's leaseDurationSeconds (kubelet: 40 s).
	leaseDuration = 40 * time.Second
	// renewInterval is how often the Lease is renewed and the status
	// compared with the Node's: a quarter of the lease duration, as the
	// kubelet's nodeStatusUpdateFrequency (10 s).
	renewInterval = leaseDuration / 4
	// DefaultReportFrequency is how often the status is written when
	// nothing changed (the kubelet's nodeStatusReportFrequency).
	DefaultReportFrequency = 5 * time.Minute
	// updateRetries bounds the attempts of one status write or lease
	// renewal that meet a conflict (the kubelet's nodeStatusUpdateRetry
	// and the lease controller's maxUpdateRetries).
	updateRetries = 5
	// requestTimeout bounds each call to the API server, so a slow one
	// delays the next renewal rather than stopping them.
	requestTimeout = renewInterval
	// The back-off after a failure: from backoffMin, doubling, to
	// backoffMax (the kubelet's registration back-off), with equal
	// jitter so a fleet that lost its API server does not come back in
	// step.
	backoffMin = 200 * time.Millisecond
	backoffMax = 7 * time.Second
)

// NodeClient reaches the Nodes: client-go's typed Nodes client, or
// kubeclient's.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
	Create(ctx context.Context, node *v1.Node, opts metav1.CreateOptions) (*v1.Node, error)
	Update(ctx context.Context, node *v1.Node, opts metav1.UpdateOptions) (*v1.Node, error)
	UpdateStatus(ctx context.Context, node *v1.Node, opts metav1.UpdateOptions) (*v1.Node, error)
}

// LeaseClient reaches the Leases of kube-node-lease.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// Config configures the node's registration and status.
type Config struct {
	Nodes NodeClient
	// Leases are kube-node-lease's (LeaseNamespace).
	Leases   LeaseClient
	NodeName string
	// Hostname is the Hostname address and the kubernetes.io/hostname
	// label (the node name, as the kubelet without a cloud provider).
	Hostname string
	// Labels are set at registration besides the kubelet's own
	// (--node-labels and the config file's labels).
	Labels map[string]string
	// Taints are set at registration (--register-with-taints).
	Taints []v1.Taint
	// NodeIP is the InternalIP address; empty reports none.
	NodeIP string
	// Capacity is the machine's cpu, memory and ephemeral-storage; pods
	// is MaxPods.
	Capacity v1.ResourceList
	MaxPods  int
	// NodeInfo is the machine's system info (SystemInfo); its OS,
	// architecture and kubelet version are filled in here.
	NodeInfo       v1.NodeSystemInfo
	KubeletVersion string
	// Pressure measures the machine for the pressure conditions
	// (Measure on the root directory); nil reports none.
	Pressure func() Pressure
	// ReportFrequency is --node-status-report-frequency
	// (DefaultReportFrequency when 0).
	ReportFrequency time.Duration
	// APIServer is the API server's address (the kubeconfig's server,
	// no credentials), for State.
	APIServer string
	// CertificateExpiry returns when the client certificate of TLS
	// bootstrap expires (zero when none is issued); nil without TLS
	// bootstrap. Called from the controller's goroutine.
	CertificateExpiry func() time.Time
	// Rand returns uniform numbers in [0, 1) for the jitter; nil is
	// math/rand/v2.
	Rand    func() float64
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics prometheus.Registerer
}

// Controller registers the node and keeps its status and Lease. It runs
// in its own goroutine and only reads the agent's state through snapshot,
// so an API server that is down or slow never holds up pods.
type Controller struct {
	cfg      Config
	nodes    NodeClient
	leases   LeaseClient
	clock    clock.Clock
	log      *slog.Logger
	snapshot func() Snapshot
	metrics  metrics

	// Owned by the goroutine in Run.
	registered  bool
	lease       *coordinationv1.Lease // the last one read or written; nil re-reads it
	nodeUID     types.UID
	lastReport  time.Time // when the status was last written
	lastRenewal time.Time // when the Lease was last renewed
	failures    int
	lastErr     string    // of the last failed step; "" after a success
	errSince    time.Time // when the failures in a row began

	// state is what State serves: written by the goroutine in Run
	// (publish), read by any goroutine.
	state atomic.Pointer[State]
}

type metrics struct {
	registered     prometheus.Gauge
	renewals       *prometheus.CounterVec
	lastRenewal    prometheus.Gauge
	statusUpdates  *prometheus.CounterVec
	registrationOK prometheus.Counter
}

// New builds the controller of the node cfg names; snapshot must be safe
// to call from the controller's goroutine.
func New(cfg Config, snapshot func() Snapshot) *Controller {
	if cfg.ReportFrequency <= 0 {
		cfg.ReportFrequency = DefaultReportFrequency
	}
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
	if cfg.Hostname == "" {
		cfg.Hostname = cfg.NodeName
	}
	c := &Controller{
		cfg:      cfg,
		nodes:    cfg.Nodes,
		leases:   cfg.Leases,
		clock:    cfg.Clock,
		log:      cfg.Logger.With("node", cfg.NodeName),
		snapshot: snapshot,
		metrics: metrics{
			registered: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "berth_node_registered", Help: "1 while berth's Node is registered with the API server (--kubeconfig), else 0.",
			}),
			renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "berth_node_lease_renewals_total", Help: "Renewals of the node's Lease in kube-node-lease, by result (ok, error).",
			}, []string{"result"}),
			lastRenewal: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "berth_node_lease_last_renewal_timestamp_seconds", Help: "When the node's Lease was last renewed, in seconds since the epoch.",
			}),
			statusUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "berth_node_status_updates_total", Help: "Writes of the Node's status, by result (ok, error).",
			}, []string{"result"}),
			registrationOK: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "berth_node_registrations_total", Help: "Times berth registered its Node (created it, or found it and took it over).",
			}),
		},
	}
	cfg.Metrics.MustRegister(c.metrics.registered, c.metrics.renewals, c.metrics.lastRenewal, c.metrics.statusUpdates, c.metrics.registrationOK)
	c.publish()
	return c
}

// Run registers the node, then renews its Lease and checks its status
// every renewInterval until ctx is done; after a failure it retries with
// back-off.
func (c *Controller) Run(ctx context.Context) {
	for {
		wait := c.step(ctx)
		t := c.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// step makes one round (register if needed, renew, write the status if
// due) and returns how long to wait before the next.
func (c *Controller) step(ctx context.Context) time.Duration {
	err := c.round(ctx)
	if ctx.Err() != nil {
		return 0
	}
	defer c.publish()
	if err != nil {
		if c.failures == 0 {
			c.errSince = c.clock.Now()
		}
		c.failures++
		if err.Error() != c.lastErr {
			c.log.Warn("API server: node not kept up to date; retrying with back-off (pods are not affected)", "err", err)
		}
		c.lastErr = err.Error()
		return backoff.Jittered(backoffMin, backoffMax, c.failures, c.cfg.Rand())
	}
	if c.lastErr != "" {
		c.log.Info("API server: node up to date again")
	}
	c.failures, c.lastErr = 0, ""
	return renewInterval
}

func (c *Controller) round(ctx context.Context) error {
	if !c.registered {
		if err := c.register(ctx); err != nil {
			return err
		}
	}
	leaseErr := c.renewLease(ctx)
	if err := c.updateStatus(ctx); err != nil {
		return err
	}
	return leaseErr
}

// register creates the Node, or takes over the existing one of its name
// (a restart, or a node deleted and re-created by berth), putting its
// default labels back as the kubelet does.
func (c *Controller) register(ctx context.Context) error {
	nodes := c.nodes
	node := c.initialNode()
	c.setStatus(node, c.observe(), c.clock.Now())
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	created, err := nodes.Create(rctx, node, metav1.CreateOptions{})
	cancel()
	switch {
	case err == nil:
		c.nodeUID = created.UID
		c.log.Info("node registered with the API server")
	case apierrors.IsAlreadyExists(err):
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		existing, err := nodes.Get(rctx, c.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("register node %s: get the existing Node: %w", c.cfg.NodeName, err)
		}
		c.nodeUID = existing.UID
		if c.reconcileLabels(existing) {
			if _, err := nodes.Update(rctx, existing, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("register node %s: update the labels: %w", c.cfg.NodeName, err)
			}
		}
		c.log.Info("node found registered with the API server; berth keeps it")
	default:
		return fmt.Errorf("register node %s: %w", c.cfg.NodeName, err)
	}
	c.registered = true
	c.lastReport = time.Time{}
	c.metrics.registered.Set(1)
	c.metrics.registrationOK.Inc()
	return nil
}

// observe is the agent's snapshot with the machine's pressure.
func (c *Controller) observe() Snapshot {
	snap := c.snapshot()
	if c.cfg.Pressure != nil {
		snap.Pressure = c.cfg.Pressure()
	}
	return snap
}

// unregistered notes that the Node is gone: the next round registers it
// again.
func (c *Controller) unregistered() {
	c.registered, c.lease, c.nodeUID = false, nil, ""
	c.metrics.registered.Set(0)
}

// updateStatus writes the Node's status when it changed or
// ReportFrequency passed since the last write, with the API server's
// optimistic concurrency: the write carries the resourceVersion read, and
// a conflict re-reads the Node and tries again. The first read may come
// from the API server's cache (resourceVersion "0"), as the kubelet's.
func (c *Controller) updateStatus(ctx context.Context) error {
	nodes := c.nodes
	snap := c.observe()
	var err error
	for i := range updateRetries {
		opts := metav1.GetOptions{}
		if i == 0 {
			opts.ResourceVersion = "0"
		}
		err = c.tryUpdateStatus(ctx, nodes, opts, snap)
		if err == nil || !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			c.unregistered()
		}
		return fmt.Errorf("update status of node %s: %w", c.cfg.NodeName, err)
	}
	return nil
}

func (c *Controller) tryUpdateStatus(ctx context.Context, nodes NodeClient, opts metav1.GetOptions, snap Snapshot) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	node, err := nodes.Get(ctx, c.cfg.NodeName, opts)
	if err != nil {
		return err
	}
	c.nodeUID = node.UID
	now := c.clock.Now()
	updated := node.DeepCopy()
	c.setStatus(updated, snap, now)
	if !statusChanged(&node.Status, &updated.Status) && now.Sub(c.lastReport) < c.cfg.ReportFrequency {
		return nil
	}
	if _, err := nodes.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		c.metrics.statusUpdates.WithLabelValues("error").Inc()
		return err
	}
	c.metrics.statusUpdates.WithLabelValues("ok").Inc()
	c.lastReport = now
	return nil
}

// renewLease renews the node's Lease, creating it when missing. An update
// carries the resourceVersion of the Lease last read or written; after a
// conflict (another writer, or a Lease deleted and re-created) it is read
// again and the renewal tried again, as the kubelet's lease controller.
func (c *Controller) renewLease(ctx context.Context) error {
	var err error
	for range updateRetries {
		err = c.tryRenewLease(ctx)
		if err == nil {
			c.lastRenewal = c.clock.Now()
			c.metrics.renewals.WithLabelValues("ok").Inc()
			c.metrics.lastRenewal.Set(float64(c.lastRenewal.UnixNano()) / 1e9)
			return nil
		}
		c.lease = nil
		if !apierrors.IsConflict(err) {
			break
		}
	}
	c.metrics.renewals.WithLabelValues("error").Inc()
	return fmt.Errorf("renew lease %s/%s: %w", LeaseNamespace, c.cfg.NodeName, err)
}

func (c *Controller) tryRenewLease(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	leases := c.leases
	if c.lease == nil {
		l, err := leases.Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			created, err := leases.Create(ctx, c.newLease(), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			c.lease = created
			return nil
		}
		if err != nil {
			return err
		}
		c.lease = l
	}
	l := c.lease.DeepCopy()
	c.fillLease(l)
	updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	c.lease = updated
	return nil
}

func (c *Controller) newLease() *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.cfg.NodeName, Namespace: LeaseNamespace}}
	c.fillLease(l)
	return l
}

// fillLease renews l now, held by this node for leaseDuration and owned by
// the Node, so the Lease goes when the Node is deleted.
func (c *Controller) fillLease(l *coordinationv1.Lease) {
	l.Spec.HolderIdentity = ptr.To(c.cfg.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(leaseDuration / time.Second))
	l.Spec.RenewTime = &metav1.MicroTime{Time: c.clock.Now()}
	if c.nodeUID != "" && len(l.OwnerReferences) == 0 {
		l.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: c.cfg.NodeName, UID: c.nodeUID,
		}}
	}
}
