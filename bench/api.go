package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
)

// readyz reports whether berth's GET /readyz answers 200.
func readyz(ctx context.Context, listen string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// apiPods reads berth's GET /pods.
func apiPods(ctx context.Context, listen string) (*corev1.PodList, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/pods", nil)
	if err != nil {
		return nil, fmt.Errorf("pods request: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get /pods: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get /pods: %s", resp.Status)
	}
	var l corev1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, fmt.Errorf("decode /pods: %w", err)
	}
	return &l, nil
}

// podsRunning counts the pods of a /pods list that are phase Running with
// every container in the running state: what an operator checks after a
// restart.
func podsRunning(l *corev1.PodList, want map[string]bool) int {
	n := 0
	for _, p := range l.Items {
		if !want[p.Name] || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
			continue
		}
		ok := true
		for _, cs := range p.Status.ContainerStatuses {
			ok = ok && cs.State.Running != nil
		}
		if ok {
			n++
		}
	}
	return n
}
