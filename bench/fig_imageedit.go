package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// The imageedit figure edits a pod that serves on a host port to an image
// only a slow registry has, and times how long no version answers.
const (
	// imageEditPad is the size the image adds to busybox: a small
	// application image's.
	imageEditPad = 24 << 20
	// imageEditRate is the slow registry's rate, in bytes per second.
	imageEditRate = 4 << 20
	// imageEditProbe is how often the pod's port is asked.
	imageEditProbe = 10 * time.Millisecond
	imageEditRow   = "image edit downtime: no version answers"
	imageEditTotal = "image edit: rename -> new version answers"
)

// imageEditTarget: the pull happens while the old version serves, so what
// is left is a stop and a start on the host network.
var imageEditTarget = &Target{Text: "< 2 s", Limit: 2000}

// NeedsRegistry reports whether the figures only selects (all when
// empty) need the bed's registry.
func NeedsRegistry(only []string) bool {
	return len(only) == 0 || strings.Contains(","+strings.Join(only, ",")+",", ",imageedit,")
}

// imageEditSetup is the slow registry of a run and the image behind it.
type imageEditSetup struct {
	proxy *throttleProxy
	ref   string // the image through the proxy
}

// setUpImageEdit pushes the padded image to the bed's registry and puts
// the throttling proxy in front of it, once per run.
func (r *runner) setUpImageEdit() (*imageEditSetup, error) {
	if r.imageEdit != nil {
		return r.imageEdit, nil
	}
	if _, err := r.bed.PushPaddedBusybox("bench/app", "1", imageEditPad); err != nil {
		return nil, err
	}
	p, err := startThrottleProxy(r.bed.Registry, imageEditRate)
	if err != nil {
		return nil, err
	}
	if err := r.bed.AllowPlainHTTP(p.host()); err != nil {
		p.close()
		return nil, err
	}
	r.imageEdit = &imageEditSetup{proxy: p, ref: p.host() + "/bench/app:1"}
	return r.imageEdit, nil
}

// servingPod is a host-network pod that answers GET / on 127.0.0.1:port
// with gen, from image.
func servingPod(name, image string, port, gen int) *corev1.Pod {
	grace := int64(10)
	// httpd in the foreground as PID 1 would ignore TERM: sh traps it and
	// stops httpd, so a stop is as quick as the agent's own work.
	script := fmt.Sprintf("mkdir -p /tmp/www; echo %d > /tmp/www/index.html; httpd -f -p 127.0.0.1:%d -h /tmp/www & pid=$!; trap 'kill $pid; exit 0' TERM; wait", gen, port)
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", script},
			}},
		},
	}
}

// dropPod writes pod's manifest as dropManifests does (a dotfile renamed
// into place) and returns the time just before the rename.
func dropPod(dir string, pod *corev1.Pod) (time.Time, error) {
	data, err := yaml.Marshal(pod)
	if err != nil {
		return time.Time{}, fmt.Errorf("encode manifest %s: %w", pod.Name, err)
	}
	tmp := filepath.Join(dir, "."+pod.Name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return time.Time{}, fmt.Errorf("write manifest %s: %w", pod.Name, err)
	}
	t0 := time.Now()
	if err := os.Rename(tmp, manifestFile(dir, pod.Name)); err != nil {
		return time.Time{}, fmt.Errorf("rename manifest %s into place: %w", pod.Name, err)
	}
	return t0, nil
}

// answer is one probe of the serving pod: when, and the generation that
// answered (-1: none).
type answer struct {
	at  time.Time
	gen int
}

// portProber asks 127.0.0.1:port every imageEditProbe until stopped.
type portProber struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex // guards answers
	answers []answer
}

func probePort(port int) *portProber {
	p := &portProber{stop: make(chan struct{})}
	client := &http.Client{Timeout: 250 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/"
	p.wg.Go(func() {
		tick := time.NewTicker(imageEditProbe)
		defer tick.Stop()
		for {
			a := answer{at: time.Now(), gen: -1}
			if resp, err := client.Get(url); err == nil {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
				resp.Body.Close()
				if g, err := strconv.Atoi(strings.TrimSpace(string(body))); err == nil && resp.StatusCode == http.StatusOK {
					a.gen = g
				}
			}
			p.mu.Lock()
			p.answers = append(p.answers, a)
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	})
	return p
}

// answered reports whether gen has answered.
func (p *portProber) answered(gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.answers {
		if a.gen == gen {
			return true
		}
	}
	return false
}

// end stops the probes and returns them.
func (p *portProber) end() []answer {
	close(p.stop)
	p.wg.Wait()
	return p.answers
}

// downtime is the gap from the last answer of any other version to the
// first answer of gen, and when that first answer came.
func downtime(answers []answer, gen int) (time.Duration, time.Time, error) {
	var last time.Time
	for _, a := range answers {
		switch {
		case a.gen == gen:
			if last.IsZero() {
				return 0, time.Time{}, fmt.Errorf("version %d answered before any other did", gen)
			}
			return a.at.Sub(last), a.at, nil
		case a.gen >= 0:
			last = a.at
		}
	}
	return 0, time.Time{}, fmt.Errorf("version %d never answered", gen)
}

// figImageEdit: a pod serving on a host port is edited to an image that
// only a slow registry (imageEditRate) has; the figure is the time no
// version answers, from the last answer of the old version to the first
// of the new one. Each run first edits the pod back to the local image
// and removes the registry's image from the runtime, so every timed edit
// pulls it whole.
func (r *runner) figImageEdit(ctx context.Context) error {
	if r.bed.Registry == "" {
		r.res.na(imageEditRow, "ms", "the bed was started without its registry", imageEditTarget, "stops first, then pulls")
		return nil
	}
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	if err := r.warmUp(ctx); err != nil {
		return err
	}
	setup, err := r.setUpImageEdit()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("find a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	const name = "imgedit"
	var downs, totals []float64
	for i := 1; i <= r.plan.editRuns; i++ {
		local, edited := 2*i-1, 2*i
		if _, err := dropPod(r.manifests, servingPod(name, benchImage, port, local)); err != nil {
			return err
		}
		// One prober sees the old version answer, then the new one.
		probe := probePort(port)
		err := r.poll(ctx, 50*time.Millisecond, podTimeout, fmt.Sprintf("version %d answering", local), func() (bool, error) { return probe.answered(local), nil })
		if err == nil {
			err = r.removeImage(ctx, setup.ref)
		}
		var t0 time.Time
		if err == nil {
			t0, err = dropPod(r.manifests, servingPod(name, setup.ref, port, edited))
		}
		if err == nil {
			err = r.poll(ctx, 50*time.Millisecond, 5*time.Minute, fmt.Sprintf("version %d (pulled) answering", edited), func() (bool, error) { return probe.answered(edited), nil })
		}
		answers := probe.end()
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		d, first, err := downtime(answers, edited)
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		downs, totals = append(downs, ms(d)), append(totals, ms(first.Sub(t0)))
	}
	r.res.add(imageEditRow, "ms", downs, imageEditTarget, "stops first, then pulls")
	r.res.add(imageEditTotal, "ms", totals, nil, "")
	r.res.note("image edit: %d MiB image through a %d MiB/s registry, probed every %s", (imageEditPad>>20)+2, imageEditRate>>20, imageEditProbe)
	return r.clear(ctx)
}

// removeImage removes ref from the runtime, so the next use pulls it.
func (r *runner) removeImage(ctx context.Context, ref string) error {
	cctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	if _, err := r.bed.Images().RemoveImage(cctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}
