package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criclient"
)

// runtimeInfo is what the runtime said about itself, asked once per Run:
// its version, its verbose status, and the parts of containerd's
// configuration the checks read from that status.
type runtimeInfo struct {
	// err is why the runtime could not be asked; the other fields are
	// then empty.
	err     error
	version *runtimeapi.VersionResponse
	status  *runtimeapi.StatusResponse
	// config is containerd's CRI configuration (Status info "config");
	// zero for a runtime that does not report it (CRI-O).
	config runtimeConfig
	// cni is the network configuration containerd loaded (Status info
	// "cniconfig", from go-cni: 1.6 to 2.x).
	cni cniLoaded
	// configErr is why info "config" or "cniconfig" could not be read.
	configErr error
}

// runtimeConfig is the part of containerd's CRI configuration doctor
// reads. The JSON names are those containerd's Status reports: 1.x has
// sandboxImage and cni.binDir, 2.x cni.binDirs and no sandbox image.
type runtimeConfig struct {
	SandboxImage  string `json:"sandboxImage"`
	SystemdCgroup bool   `json:"systemdCgroup"`
	Containerd    struct {
		DefaultRuntimeName string `json:"defaultRuntimeName"`
		Runtimes           map[string]struct {
			Options map[string]any `json:"options"`
		} `json:"runtimes"`
	} `json:"containerd"`
	CNI struct {
		BinDir     string   `json:"binDir"`
		BinDirs    []string `json:"binDirs"`
		ConfDir    string   `json:"confDir"`
		MaxConfNum int      `json:"maxConfNum"`
	} `json:"cni"`
}

// cniLoaded is go-cni's view of the network configuration: the
// directories it uses and how many networks it loads.
type cniLoaded struct {
	PluginDirs       []string `json:"PluginDirs"`
	PluginConfDir    string   `json:"PluginConfDir"`
	PluginMaxConfNum int      `json:"PluginMaxConfNum"`
}

// askRuntime asks the runtime for its version and verbose status.
func (e *env) askRuntime(ctx context.Context) *runtimeInfo {
	ri := &runtimeInfo{}
	if e.dialErr != nil {
		ri.err = e.dialErr
		return ri
	}
	v, err := criclient.CheckVersion(ctx, e.rs, e.opts.RuntimeEndpoint)
	if err != nil {
		ri.err = err
		return ri
	}
	ri.version = v
	st, err := e.rs.Status(ctx, true)
	if err != nil {
		ri.err = fmt.Errorf("container runtime status at %s: %w", e.opts.RuntimeEndpoint, err)
		return ri
	}
	ri.status = st
	if raw := st.GetInfo()["config"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &ri.config); err != nil {
			ri.configErr = fmt.Errorf("the runtime's status info \"config\": %w", err)
		}
	}
	if raw := st.GetInfo()["cniconfig"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &ri.cni); err != nil {
			ri.configErr = fmt.Errorf("the runtime's status info \"cniconfig\": %w", err)
		}
	}
	return ri
}

// name is "containerd 1.6.20~ds1", or "the runtime" before it answered.
func (ri *runtimeInfo) name() string {
	if ri.version == nil {
		return "the runtime"
	}
	return ri.version.GetRuntimeName() + " " + ri.version.GetRuntimeVersion()
}

// condition returns the status condition of type typ, nil if not reported.
func (ri *runtimeInfo) condition(typ string) *runtimeapi.RuntimeCondition {
	for _, c := range ri.status.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// checkRuntime: the runtime answers, speaks CRI v1 and is ready. A
// condition other than RuntimeReady and NetworkReady (the CNI line's)
// that is false, such as containerd 2's
// ContainerdHasNoDeprecationWarnings, is a WARN.
func checkRuntime(ri *runtimeInfo, endpoint string) Result {
	r := Result{Check: "runtime"}
	if ri.err != nil {
		r.Status, r.Message = Fail, ri.err.Error()
		r.Fix = "start the runtime (systemctl start containerd) with its CRI plugin enabled, or set --container-runtime-endpoint to the socket it listens on"
		return r
	}
	what := fmt.Sprintf("%s (CRI %s) at %s", ri.name(), ri.version.GetRuntimeApiVersion(), endpoint)
	if c := ri.condition(runtimeapi.RuntimeReady); c == nil || !c.GetStatus() {
		r.Status = Fail
		r.Message = what + " is not ready" + conditionReason(c)
		r.Fix = "see the runtime's log (journalctl -u containerd)"
		return r
	}
	var other []string
	for _, c := range ri.status.GetStatus().GetConditions() {
		if t := c.GetType(); t != runtimeapi.RuntimeReady && t != runtimeapi.NetworkReady && !c.GetStatus() {
			other = append(other, t+conditionReason(c))
		}
	}
	if len(other) > 0 {
		r.Status = Warn
		r.Message = what + " is ready, but reports " + strings.Join(other, "; ")
		r.Fix = "see the runtime's log (journalctl -u containerd) and its documentation for these conditions"
		return r
	}
	r.Status, r.Message = OK, what+" is ready"
	return r
}

// conditionReason is ": reason: message" of a false condition, or
// " (not reported)" for a missing one.
func conditionReason(c *runtimeapi.RuntimeCondition) string {
	if c == nil {
		return " (not reported)"
	}
	s := ""
	if c.GetReason() != "" {
		s += ": " + c.GetReason()
	}
	if c.GetMessage() != "" {
		s += ": " + c.GetMessage()
	}
	return s
}
