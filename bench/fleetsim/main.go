// Command fleetsim is `make fleet-sim`: a fleet of N simulated berth
// devices, each running berth's real URL source (source.Run: the poll
// schedule, conditional requests, parsing) and its real status reporter
// (statusreport.Reporter), against one real nginx (Debian's, started on
// loopback with a private config) serving per-group manifests and taking
// the status reports by WebDAV PUT. No container runtime: a device
// "applies" a version when its merge store holds that version's pods.
//
// It prints, with and without the poll jitter: requests/s and bytes/s at
// the server while idle (mean and the busiest second), and the time from
// publishing a new version to 50/99/100% of the fleet having applied it
// and to 99% of their status reports at the server naming it.
//
//	fleetsim -n 2000 -period 20s -idle 60s -rollouts 3
//
// -sig signs every version (an ed25519 key made for the run, SSH
// signatures as ssh-keygen -Y sign makes them, a serial first line) and
// has every device verify it with berth's own verifier: the signature is
// fetched beside a changed body only, as berth does.
package main

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hiddeco/sshsig"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/ssh"

	"github.com/berth-agent/berth/e2e/testbed"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source"
	"github.com/berth-agent/berth/internal/statusreport"
	"github.com/berth-agent/berth/internal/store"
)

func main() {
	var o options
	flag.IntVar(&o.n, "n", 2000, "simulated devices")
	flag.IntVar(&o.groups, "groups", 10, "device groups, each with its own manifest URL")
	flag.IntVar(&o.podsPerGroup, "pods", 3, "pods in each group's manifest")
	flag.DurationVar(&o.period, "period", 20*time.Second, "--http-check-frequency of every device")
	flag.DurationVar(&o.statusPeriod, "status-period", statusreport.DefaultPeriod, "--status-period of every device")
	flag.DurationVar(&o.idle, "idle", 60*time.Second, "idle window measured at the server")
	flag.IntVar(&o.rollouts, "rollouts", 3, "new versions published per mode (at random points of the period)")
	flag.StringVar(&o.modes, "modes", "jitter,nojitter", "poll modes to run: jitter (berth's schedule), nojitter (the same without jitter)")
	flag.BoolVar(&o.sig, "sig", false, "sign every version and have every device verify it (berth's SSH signature check)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim:", err)
		os.Exit(1)
	}
}

type options struct {
	n, groups, podsPerGroup, rollouts int
	period, statusPeriod, idle        time.Duration
	modes                             string
	sig                               bool
}

func run(o options) error {
	if err := raiseFileLimit(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fleetsim-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ngx, err := testbed.StartNginx(dir, testbed.NginxOptions{})
	if err != nil {
		return err
	}
	defer ngx.Stop() //nolint:errcheck // best effort at exit
	s := &sim{o: o, ngx: ngx}
	if o.sig {
		if s.key, s.signers, err = newFleetKey(); err != nil {
			return err
		}
	}
	if err := s.publish(1); err != nil {
		return err
	}
	fmt.Printf("fleet simulation: %d devices in %d groups (%d pods each), poll period %s, status period %s, nginx at %s, signed %v\n",
		o.n, o.groups, o.podsPerGroup, o.period, o.statusPeriod, ngx.URL, o.sig)
	for _, mode := range strings.Split(o.modes, ",") {
		var r func() float64
		switch mode {
		case "jitter":
		case "nojitter":
			r = func() float64 { return 0.5 } // the schedule's unjittered delays
		default:
			return fmt.Errorf("unknown mode %q", mode)
		}
		if err := s.runMode(mode, r); err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
	}
	return nil
}

// sim is one simulation: the server and the version being rolled out.
type sim struct {
	o       options
	ngx     *testbed.Nginx
	version atomic.Int64 // the version published last
	// failed counts the devices' requests for manifests that got no
	// answer or an error status, in the current mode.
	failed atomic.Int64
	// key signs every version and signers verify it, with -sig.
	key     ssh.Signer
	signers *source.Signers
}

// newFleetKey makes the run's signing key and the allowed signers that
// trust it, as an operator's ssh-keygen and allowed_signers file would.
func newFleetKey() (ssh.Signer, *source.Signers, error) {
	_, priv, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("fleet key: %w", err)
	}
	key, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("fleet key: %w", err)
	}
	signers, err := source.ParseAllowedSigners(append([]byte("fleet@example.com "), ssh.MarshalAuthorizedKey(key.PublicKey())...), "fleetsim allowed signers")
	if err != nil {
		return nil, nil, fmt.Errorf("fleet allowed signers: %w", err)
	}
	return key, signers, nil
}

// failCounter counts the requests of a device that failed.
type failCounter struct {
	base   http.RoundTripper
	failed *atomic.Int64
}

func (c failCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotModified) {
		c.failed.Add(1)
	}
	return resp, err
}

// groupPath is a group's manifest URL path.
func groupPath(g int) string { return fmt.Sprintf("/groups/g%02d/pods.yaml", g) }

// publish writes version v of every group's manifest (with -sig, signed
// and its signature beside it, the body first), each file atomically.
func (s *sim) publish(v int) error {
	for g := range s.o.groups {
		var b strings.Builder
		if s.key != nil {
			fmt.Fprintf(&b, "%s %d\n", source.SerialPrefix, v)
		}
		b.WriteString("apiVersion: v1\nkind: PodList\nitems:\n")
		for p := range s.o.podsPerGroup {
			fmt.Fprintf(&b, "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: app%d\n  spec:\n    containers:\n    - name: main\n      image: registry.example/g%02d/app%d:v%d\n", p, g, p, v)
		}
		if err := s.ngx.Publish(groupPath(g), []byte(b.String())); err != nil {
			return err
		}
		if s.key == nil {
			continue
		}
		sig, err := sshsig.Sign(strings.NewReader(b.String()), s.key, sshsig.HashSHA512, source.SignatureNamespace)
		if err != nil {
			return fmt.Errorf("sign version %d: %w", v, err)
		}
		if err := s.ngx.Publish(groupPath(g)+".sig", sshsig.Armor(sig)); err != nil {
			return err
		}
	}
	s.version.Store(int64(v))
	return nil
}

// device is one simulated berth.
type device struct {
	node    string
	store   *store.Store
	applied sync.Map // version (int64) -> time.Time it was first applied
}

// versionOf is the version all of the store's pods run, 0 when mixed or
// none.
func versionOf(store *store.Store) int64 {
	var v int64
	for _, p := range store.Pods() {
		img := p.Spec.Containers[0].Image
		i := strings.LastIndex(img, ":v")
		if i < 0 {
			return 0
		}
		var pv int64
		if _, err := fmt.Sscanf(img[i+2:], "%d", &pv); err != nil || (v != 0 && pv != v) {
			return 0
		}
		v = pv
	}
	return v
}

// snapshot is the device's status report: the pods of its store as
// running (there is no runtime), and the store's manifest version.
func (d *device) snapshot() statusreport.Report {
	rep := statusreport.Report{Node: d.node, Ready: d.store.SourcesReady(), ManifestVersions: d.store.Versions(), Pods: []statusreport.PodReport{}}
	for _, p := range d.store.Pods() {
		rep.Pods = append(rep.Pods, statusreport.PodReport{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Phase: "Running", Ready: "1/1"})
	}
	return rep
}

// runMode starts the fleet, measures it idle and through the rollouts, and
// stops it.
func (s *sim) runMode(mode string, r func() float64) error {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	devices := make([]*device, s.o.n)
	s.failed.Store(0)
	started := time.Now()
	for i := range devices {
		d := &device{node: fmt.Sprintf("dev-%04d", i), store: store.New(podspec.SourceHTTP)}
		devices[i] = d
		// Every device has its own connections, as real devices do.
		var rt http.RoundTripper = failCounter{&http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 5 * time.Minute}, &s.failed}
		url := s.ngx.URL + groupPath(i%s.o.groups)
		cfg := source.Config{NodeName: d.node, URL: url, HTTPCheckFrequency: s.o.period,
			HTTPClient: &http.Client{Transport: rt}, Rand: r, Logger: quiet,
			URLSigners: s.signers, Metrics: source.NewMetrics(prometheus.NewRegistry())}
		rep := statusreport.New(statusreport.Config{
			URL: s.ngx.URL + "/status/" + d.node + ".json", Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}},
			Period: s.o.statusPeriod, Rand: r, Logger: quiet,
		}, d.snapshot)
		wg.Add(3)
		go func() { defer wg.Done(); _ = source.Run(ctx, cfg, d.store) }()
		go func() { defer wg.Done(); rep.Run(ctx) }()
		go func() { defer wg.Done(); d.follow(ctx) }()
	}
	v := s.version.Load()
	if err := waitApplied(ctx, devices, v, 1.0, started, 3*s.o.period); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	fmt.Printf("\n== %s: all %d devices applied version %d %.1fs after starting together (%d requests for manifests failed on the way)\n",
		mode, s.o.n, v, time.Since(started).Seconds(), s.failed.Load())
	// The start burst and its first spread period pass before measuring.
	time.Sleep(2 * s.o.period)
	from := time.Now()
	time.Sleep(s.o.idle)
	if err := s.reportIdle(from, time.Now()); err != nil {
		return err
	}
	for range s.o.rollouts {
		time.Sleep(time.Duration(rand.Float64() * float64(s.o.period)))
		if err := s.rollout(ctx, devices); err != nil {
			return err
		}
	}
	return nil
}

// follow drains the device's store updates (as the agent would) and
// records when the device first ran each version.
func (d *device) follow(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.store.Updates():
		}
		if v := versionOf(d.store); v != 0 {
			d.applied.LoadOrStore(v, time.Now())
		}
	}
}

// waitApplied waits until frac of the devices applied version v.
func waitApplied(ctx context.Context, devices []*device, v int64, frac float64, since time.Time, timeout time.Duration) error {
	need := int(frac * float64(len(devices)))
	for {
		n := 0
		for _, d := range devices {
			if _, ok := d.applied.Load(v); ok {
				n++
			}
		}
		if n >= need {
			return nil
		}
		if time.Since(since) > timeout {
			return fmt.Errorf("%d of %d devices applied version %d within %s", n, len(devices), v, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reportIdle prints the server's load between from and to.
func (s *sim) reportIdle(from, to time.Time) error {
	log, err := s.ngx.AccessLog()
	if err != nil {
		return err
	}
	secs := to.Sub(from).Seconds()
	var polls, sigs, puts, other, bytes int64
	perSecond := map[int64]int64{}
	statuses := map[int]int64{}
	for _, e := range log {
		if e.At.Before(from) || !e.At.Before(to) {
			continue
		}
		switch {
		case e.Method == http.MethodPut:
			puts++
		case strings.HasSuffix(e.URI, ".sig"):
			sigs++
		case strings.HasPrefix(e.URI, "/groups/"):
			polls++
			statuses[e.Status]++
		default:
			other++
		}
		bytes += e.BytesIn + e.BytesOut
		perSecond[e.At.Unix()]++
	}
	var peak int64
	for _, n := range perSecond {
		peak = max(peak, n)
	}
	total := polls + sigs + puts + other
	fmt.Printf("idle %.0fs at the server: %.1f requests/s (%d polls, %d answered 304; %d signature fetches; %d status PUTs), %.0f bytes/s in+out, busiest second %d requests\n",
		secs, float64(total)/secs, polls, statuses[http.StatusNotModified], sigs, puts, float64(bytes)/secs, peak)
	return nil
}

// rollout publishes the next version and measures how fast the fleet
// applies it, and how fast the status reports at the server name it.
func (s *sim) rollout(ctx context.Context, devices []*device) error {
	v := s.version.Load() + 1
	t0 := time.Now()
	if err := s.publish(int(v)); err != nil {
		return err
	}
	if err := waitApplied(ctx, devices, v, 1.0, t0, 3*s.o.period+time.Minute); err != nil {
		return err
	}
	var took []float64
	for _, d := range devices {
		at, _ := d.applied.Load(v)
		took = append(took, at.(time.Time).Sub(t0).Seconds())
	}
	slices.Sort(took)
	pct := func(p float64) float64 { return took[min(len(took)-1, int(p*float64(len(took))))] }
	statusAt, err := s.statusVisible(ctx, v, t0)
	if err != nil {
		return err
	}
	fmt.Printf("version %d: applied by 50%% of the fleet after %.1fs, 99%% after %.1fs, all after %.1fs; 99%% of the status reports at the server name it after %.1fs\n",
		v, pct(0.5), pct(0.99), took[len(took)-1], statusAt)
	return nil
}

// statusVisible waits until 99% of the status reports nginx stored name
// version v's ETag, and returns the seconds since t0.
func (s *sim) statusVisible(ctx context.Context, v int64, t0 time.Time) (float64, error) {
	etags := map[string]bool{}
	for g := range s.o.groups {
		resp, err := http.Head(s.ngx.URL + groupPath(g))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		etags[resp.Header.Get("ETag")] = true
	}
	need := int(0.99 * float64(s.o.n))
	dir := filepath.Join(s.ngx.Root, "status")
	for {
		files, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(dir, f.Name()))
			if err != nil {
				continue // being replaced
			}
			var rep statusreport.Report
			if json.Unmarshal(data, &rep) == nil && etags[rep.ManifestVersions[podspec.SourceHTTP]] {
				n++
			}
		}
		if n >= need {
			return time.Since(t0).Seconds(), nil
		}
		if time.Since(t0) > 3*s.o.period+time.Minute {
			return 0, fmt.Errorf("only %d status reports name version %d", n, v)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// raiseFileLimit lifts the soft limit on open files to the hard one: each
// device holds its own connections.
func raiseFileLimit() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("open files limit: %w", err)
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("open files limit: %w", err)
	}
	return nil
}
