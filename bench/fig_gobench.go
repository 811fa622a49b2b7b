package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// goBenchTimeout bounds one package's `go test -bench`.
const goBenchTimeout = 10 * time.Minute

// figGoBench reports the Go benchmarks of the configured packages (the
// manifest package's rename -> ADD latency and decode+validate figures),
// one row per benchmark and reported unit, over -count runs. A package
// without benchmarks yet is noted, not failed.
func (r *runner) figGoBench(ctx context.Context) error {
	for _, pkg := range r.opts.GoBench {
		has, err := hasBenchmarks(filepath.Join(r.opts.RepoDir, pkg))
		if err != nil {
			return err
		}
		if !has {
			r.res.note("go benchmarks: %s has none yet", pkg)
			continue
		}
		if err := r.goBench(ctx, pkg); err != nil {
			return err
		}
	}
	return nil
}

// hasBenchmarks reports whether a package directory's tests define any
// Benchmark function.
func hasBenchmarks(dir string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return false, fmt.Errorf("list tests of %s: %w", dir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return false, fmt.Errorf("read %s: %w", f, err)
		}
		if bytes.Contains(data, []byte("\nfunc Benchmark")) {
			return true, nil
		}
	}
	return false, nil
}

// goBench runs one package's benchmarks and adds their figures.
func (r *runner) goBench(ctx context.Context, pkg string) error {
	cctx, cancel := context.WithTimeout(ctx, goBenchTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, "go", "test", "-run=^$", "-bench=.",
		"-count="+strconv.Itoa(r.plan.goBenchCount), pkg)
	cmd.Dir = r.opts.RepoDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go test -bench %s: %w\n%s", pkg, err, out)
	}
	samples, order := parseGoBench(out)
	prefix := "go " + strings.Trim(pkg, "./") + ": "
	for _, key := range order {
		name, unit, _ := strings.Cut(key, "\x00")
		vals := samples[key]
		switch unit {
		case "B/op", "allocs/op":
			continue // memory is the idle figures' business
		case "ns/op":
			if reportsOwn(order, name) {
				continue // its own figures say it better (per manifest, per file)
			}
			unit = "ms/op"
			for i := range vals {
				vals[i] /= 1e6
			}
		}
		r.res.add(prefix+strings.TrimPrefix(name, "Benchmark"), unit, vals, goBenchTargets[key], "")
	}
	return nil
}

// reportsOwn tells whether a benchmark reports a figure of its own (with
// b.ReportMetric) besides the standard ones.
func reportsOwn(keys []string, name string) bool {
	for _, key := range keys {
		n, unit, _ := strings.Cut(key, "\x00")
		if n == name && unit != "ns/op" && unit != "B/op" && unit != "allocs/op" {
			return true
		}
	}
	return false
}

// goBenchTargets are the targets of known Go benchmark figures,
// by "name\x00unit".
var goBenchTargets = map[string]*Target{
	"BenchmarkRenameToAdd\x00ms-median": {Text: "< 5 ms", Limit: 5},
}

// parseGoBench reads `go test -bench` output: lines such as
// "BenchmarkDecode-2  1000  1234 ns/op  56 B/op  7 allocs/op  0.8 p50-ms"
// give one sample per (benchmark, unit), the GOMAXPROCS suffix dropped.
// It returns the samples by "name\x00unit" and those keys in first-seen
// order.
func parseGoBench(out []byte) (map[string][]float64, []string) {
	samples := map[string][]float64{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			key := name + "\x00" + f[i+1]
			if _, ok := samples[key]; !ok {
				order = append(order, key)
			}
			samples[key] = append(samples[key], v)
		}
	}
	return samples, order
}
