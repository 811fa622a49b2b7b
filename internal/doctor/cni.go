package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The CNI defaults of containerd and of libcni, used when neither Options
// nor the runtime name the directories.
const (
	defaultCNIConfDir = "/etc/cni/net.d"
	defaultCNIBinDir  = "/opt/cni/bin"
)

// maxCNIFileBytes bounds a network configuration read: real ones are a
// few hundred bytes, and doctor must not read a huge file someone left in
// the directory whole.
const maxCNIFileBytes = 1 << 20

// cniNetwork is what doctor needs of one network configuration file.
type cniNetwork struct {
	Name    string
	Plugins []string // the plugins' types, in order
}

// parseCNIConfig reads a network configuration as libcni (and so
// containerd's go-cni) would load it: a .conflist needs a name and at
// least one plugin, each with a type; a .conf or .json file is one plugin
// that needs a type. github.com/containernetworking/cni is not among
// berth's modules, and this is the whole of what doctor needs from it: a
// JSON object with those fields, checked field by field so the error says
// which.
func parseCNIConfig(data []byte, list bool) (cniNetwork, error) {
	var raw struct {
		Name    string            `json:"name"`
		Type    string            `json:"type"`
		Plugins []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return cniNetwork{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if !list {
		if raw.Type == "" {
			return cniNetwork{}, errors.New(`field "type": missing`)
		}
		return cniNetwork{Name: raw.Name, Plugins: []string{raw.Type}}, nil
	}
	if raw.Name == "" {
		return cniNetwork{}, errors.New(`field "name": missing`)
	}
	if len(raw.Plugins) == 0 {
		return cniNetwork{}, errors.New(`field "plugins": no plugins in the list`)
	}
	n := cniNetwork{Name: raw.Name}
	for i, p := range raw.Plugins {
		var plugin struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(p, &plugin); err != nil {
			return cniNetwork{}, fmt.Errorf("plugins[%d]: not a JSON object: %w", i, err)
		}
		if plugin.Type == "" {
			return cniNetwork{}, fmt.Errorf(`plugins[%d]: field "type": missing`, i)
		}
		n.Plugins = append(n.Plugins, plugin.Type)
	}
	return n, nil
}

// cniDirs are the directories and the number of networks the runtime
// uses: Options first, then what the runtime reports, then the defaults.
func (e *env) cniDirs(ri *runtimeInfo) (confDir string, binDirs []string, maxConf int) {
	confDir = firstNonEmpty(e.opts.CNIConfDir, ri.cni.PluginConfDir, ri.config.CNI.ConfDir, defaultCNIConfDir)
	switch {
	case len(e.opts.CNIBinDirs) > 0:
		binDirs = e.opts.CNIBinDirs
	case len(ri.cni.PluginDirs) > 0:
		binDirs = ri.cni.PluginDirs
	case len(ri.config.CNI.BinDirs) > 0:
		binDirs = ri.config.CNI.BinDirs
	case ri.config.CNI.BinDir != "":
		binDirs = []string{ri.config.CNI.BinDir}
	default:
		binDirs = []string{defaultCNIBinDir}
	}
	maxConf = max(ri.cni.PluginMaxConfNum, 1)
	if ri.cni.PluginMaxConfNum == 0 && ri.config.CNI.MaxConfNum > 0 {
		maxConf = ri.config.CNI.MaxConfNum
	}
	return confDir, binDirs, maxConf
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// checkCNI: the configuration directory holds a network configuration the
// runtime can load, its plugins are installed, and the runtime reports
// its network ready. The files are taken as go-cni takes them: *.conf,
// *.conflist and *.json in name order, failing at the first it cannot
// load, until it has maxConf networks.
func (e *env) checkCNI(ri *runtimeInfo) Result {
	r := Result{Check: "cni", Status: Fail}
	confDir, binDirs, maxConf := e.cniDirs(ri)
	fixConf := fmt.Sprintf("put a network configuration in %s (docs/install.md has one that works); pods with hostNetwork: true run without one", confDir)
	entries, err := os.ReadDir(confDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		r.Message = fmt.Sprintf("CNI configuration directory %s: %v", confDir, err)
		r.Fix = fixConf
		return r
	}
	var names []string
	for _, en := range entries {
		switch filepath.Ext(en.Name()) {
		case ".conf", ".conflist", ".json":
			if !en.IsDir() {
				names = append(names, en.Name())
			}
		}
	}
	slices.Sort(names)
	var loaded []string
	var plugins []string
	for _, name := range names {
		if len(loaded) == maxConf {
			break
		}
		path := filepath.Join(confDir, name)
		n, err := readCNIConfig(path)
		if err != nil {
			r.Message = fmt.Sprintf("%s: %v; the runtime stops at the first file it cannot load", path, err)
			r.Fix = fmt.Sprintf("fix or remove %s", path)
			return r
		}
		loaded = append(loaded, fmt.Sprintf("%s (network %q: %s)", name, n.Name, strings.Join(n.Plugins, ", ")))
		plugins = append(plugins, n.Plugins...)
	}
	if len(loaded) == 0 {
		r.Message = "no network configuration (*.conflist, *.conf, *.json) in " + confDir + ": pods on the pod network cannot start"
		r.Fix = fixConf
		return r
	}
	var missing []string
	for _, p := range plugins {
		if findPlugin(binDirs, p) == "" && !slices.Contains(missing, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		r.Message = fmt.Sprintf("%s: plugin %s not found in %s", strings.Join(loaded, ", "), strings.Join(missing, ", "), strings.Join(binDirs, ", "))
		r.Fix = "install the CNI plugins (Debian: apt install containernetworking-plugins) where the runtime looks for them (containerd: the cni bin_dir of its config.toml)"
		return r
	}
	what := strings.Join(loaded, ", ") + " in " + confDir
	if ri.err == nil {
		if c := ri.condition(runtimeapi.NetworkReady); c != nil && !c.GetStatus() {
			r.Message = what + ", but " + ri.name() + " reports its network not ready" + conditionReason(c)
			r.Fix = "see the runtime's log (journalctl -u containerd); a configuration written after the runtime started is picked up within seconds"
			return r
		}
	}
	r.Status, r.Message = OK, what
	return r
}

// readCNIConfig reads and parses one configuration file, bounded.
func readCNIConfig(path string) (cniNetwork, error) {
	f, err := os.Open(path)
	if err != nil {
		return cniNetwork{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCNIFileBytes+1))
	if err != nil {
		return cniNetwork{}, err
	}
	if len(data) > maxCNIFileBytes {
		return cniNetwork{}, fmt.Errorf("larger than %d bytes", maxCNIFileBytes)
	}
	return parseCNIConfig(data, filepath.Ext(path) == ".conflist")
}

// findPlugin returns the path of plugin's executable in the first of dirs
// that has one, or "".
func findPlugin(dirs []string, plugin string) string {
	if plugin == "" || strings.ContainsRune(plugin, '/') {
		return ""
	}
	for _, d := range dirs {
		p := filepath.Join(d, plugin)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}
