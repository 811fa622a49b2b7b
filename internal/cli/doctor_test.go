package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/doctor"
)

// fakeCRI answers the two calls the runtime line is made of, Version and
// Status (a ready runtime); every other call is unimplemented, as an old
// runtime's would be, which the other checks report on their own lines.
type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (fakeCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fakecri", RuntimeVersion: "9.9", RuntimeApiVersion: "v1"}, nil
}

func (fakeCRI) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true},
	}}}, nil
}

// serveFakeCRI serves fakeCRI on a unix socket until the test ends and
// returns its endpoint.
func serveFakeCRI(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(gs, fakeCRI{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(l)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return "unix://" + path
}

// TestDoctor runs berth doctor on a fake runtime with berth run's
// settings given as flags or in --config (the same resolution as run: a
// flag wins over the file): the runtime line names the endpoint and the
// manifest lines the directory the settings give, -o json is the report,
// and the exit status is doctor.Worst's, or 2 for a usage error.
func TestDoctor(t *testing.T) {
	endpoint := serveFakeCRI(t)
	dir := t.TempDir()
	fromFlag := filepath.Join(dir, "from-flag")
	fromFile := filepath.Join(dir, "from-file")
	cfg := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(cfg, []byte("containerRuntimeEndpoint: "+endpoint+"\nstaticPodPath: "+fromFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dirs := []string{"--root-dir", dir, "--pod-logs-dir", dir, "--socket", filepath.Join(dir, "berth.sock")}
	tests := []struct {
		name     string
		args     []string
		code     int
		runtime  doctor.Status // of the runtime line ("": no report)
		inLines  []string      // in the messages of the report
		inStderr string
	}{
		{"flags", []string{"--container-runtime-endpoint", endpoint, "--pod-manifest-path", fromFlag}, -1, doctor.OK,
			[]string{"fakecri 9.9 (CRI v1) at " + endpoint + " is ready", "no kubelet or other berth runs static pods from " + fromFlag}, ""},
		{"config file", []string{"--config", cfg}, -1, doctor.OK,
			[]string{"at " + endpoint + " is ready", "static pods from " + fromFile}, "warning: " + cfg + ": a config file without apiVersion is deprecated"},
		{"flag over the config file", []string{"--config", cfg, "--pod-manifest-path", fromFlag}, -1, doctor.OK,
			[]string{"at " + endpoint + " is ready", "static pods from " + fromFlag}, ""},
		{"no runtime", []string{"--container-runtime-endpoint", "unix://" + filepath.Join(dir, "none.sock")}, 1, doctor.Fail,
			[]string{"none.sock"}, ""},
		{"bad output", []string{"--container-runtime-endpoint", endpoint, "-o", "yaml"}, 2, "", nil, `-o "yaml": want text or json`},
		{"bad config", []string{"--config", filepath.Join(dir, "missing.yaml")}, 2, "", nil, "missing.yaml"},
		{"bad setting", []string{"--container-runtime-endpoint", endpoint, "--log-level", "loud"}, 2, "", nil, "loud"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append(append([]string{"doctor", "-o", "json"}, dirs...), tt.args...)
			code := Execute("dev", args, &out, &errb)
			if !strings.Contains(errb.String(), tt.inStderr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.inStderr)
			}
			if tt.runtime == "" {
				if code != tt.code || out.Len() != 0 {
					t.Errorf("exit %d with stdout %q, want exit %d and no report", code, out.String(), tt.code)
				}
				return
			}
			var report doctor.Report
			if err := json.Unmarshal(out.Bytes(), &report); err != nil {
				t.Fatalf("-o json: %v\n%s\nstderr: %s", err, out.String(), errb.String())
			}
			want := doctor.Worst(report.Checks)
			if tt.code >= 0 {
				want = tt.code
			}
			if code != want || report.Status != doctor.WorstStatus(report.Checks) {
				t.Errorf("exit %d and status %s, want exit %d and the worst status of %+v", code, report.Status, want, report.Checks)
			}
			var messages []string
			for _, r := range report.Checks {
				messages = append(messages, r.Message)
				if r.Check == "runtime" && r.Status != tt.runtime {
					t.Errorf("runtime line %s %q, want %s", r.Status, r.Message, tt.runtime)
				}
				if r.Check == "pod-network" {
					t.Errorf("a pod-network line without --run: %+v", r)
				}
			}
			all := strings.Join(messages, "\n")
			for _, in := range tt.inLines {
				if !strings.Contains(all, in) {
					t.Errorf("no line says %q:\n%s", in, all)
				}
			}
		})
	}
}

// TestDoctorText: without -o, one line per check and the summary last.
func TestDoctorText(t *testing.T) {
	endpoint := serveFakeCRI(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Execute("dev", []string{"doctor", "--container-runtime-endpoint", endpoint, "--pod-manifest-path", dir,
		"--root-dir", dir, "--pod-logs-dir", dir, "--socket", ""}, &out, &errb)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.HasPrefix(lines[0], "OK    runtime ") {
		t.Errorf("first line %q, want the runtime OK", lines[0])
	}
	last := lines[len(lines)-1]
	if code > 1 || !strings.Contains(last, " OK, ") || !strings.Contains(last, " FAIL") {
		t.Errorf("exit %d, last line %q, want the summary; stderr %q", code, last, errb.String())
	}
}
