package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// opsMetrics count every CRI call an agent makes, by operation_type: berth's
// and the kubelet's, which share their operation names.
var opsMetrics = []string{"berth_runtime_operations_total", "kubelet_runtime_operations_total"}

// opCounts is a reading of opsMetrics, by operation type.
type opCounts map[string]float64

// total sums every operation type.
func (c opCounts) total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

// minus is the per-operation increase from an earlier reading.
func (c opCounts) minus(before opCounts) opCounts {
	d := opCounts{}
	for op, v := range c {
		if v-before[op] != 0 {
			d[op] = v - before[op]
		}
	}
	return d
}

// periodic keeps the operation types an agent calls on its own schedule,
// whatever its pods do: lists (relists), runtime status and version, image
// filesystem usage and stats. Everything else is work for a pod.
func (c opCounts) periodic() opCounts {
	out := opCounts{}
	for op, v := range c {
		if periodicOp(op) {
			out[op] = v
		}
	}
	return out
}

// periodicOp tells whether op is one of periodic's operation types.
func periodicOp(op string) bool {
	switch {
	case strings.HasPrefix(op, "list_"), strings.Contains(op, "stats"), strings.Contains(op, "metric"):
		return true
	}
	switch op {
	case "status", "version", "image_fs_info", "runtime_config":
		return true
	}
	return false
}

// String lists the counts, largest first, for the notes under the table.
func (c opCounts) String() string {
	ops := make([]string, 0, len(c))
	for op := range c {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool {
		if c[ops[i]] != c[ops[j]] {
			return c[ops[i]] > c[ops[j]]
		}
		return ops[i] < ops[j]
	})
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s %s", op, num(c[op]))
	}
	return strings.Join(parts, ", ")
}

// httpClient is for the agent's local API: short timeouts, since a slow
// answer is itself a finding.
var httpClient = &http.Client{Timeout: 5 * time.Second}

// metricsClient reads an agent's metrics on the loopback: the kubelet
// serves them over HTTPS with a certificate it made itself at start, which
// nothing could check, and the bench sends nothing secret.
var metricsClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed, read-only
}}

// scrapeOps reads opsMetrics from an agent's metrics URL.
func scrapeOps(ctx context.Context, url string) (opCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics request: %w", err)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape metrics: %s", resp.Status)
	}
	return parseOps(resp.Body)
}

// parseOps picks opsMetrics' samples out of the Prometheus text format:
// lines such as `berth_runtime_operations_total{operation_type="x"} 3`.
func parseOps(r io.Reader) (opCounts, error) {
	out := opCounts{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		i := slices.IndexFunc(opsMetrics, func(m string) bool { return strings.HasPrefix(line, m+"{") })
		if i < 0 {
			continue
		}
		labels, value, ok := strings.Cut(line[len(opsMetrics[i])+1:], "} ")
		if !ok {
			return nil, fmt.Errorf("metrics: malformed line %q", line)
		}
		op := labelValue(labels, "operation_type")
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: line %q: %w", line, err)
		}
		out[op] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// labelValue extracts name="value" from a Prometheus label set.
func labelValue(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == name {
			if u, err := strconv.Unquote(strings.TrimSpace(v)); err == nil {
				return u
			}
		}
	}
	return ""
}
