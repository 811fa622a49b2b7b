package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	goodConflist = `{"cniVersion": "0.4.0", "name": "berth", "plugins": [{"type": "bridge"}, {"type": "portmap", "capabilities": {"portMappings": true}}]}`
	goodConf     = `{"cniVersion": "0.4.0", "name": "single", "type": "bridge"}`
)

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// TestCheckCNI: the configuration is taken as the runtime's go-cni takes
// it (files in name order, failing at the first it cannot load), its
// plugins must be installed, and the runtime must report its network
// ready.
func TestCheckCNI(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string // under the conf dir
		bins   []string          // plugins installed
		notDir bool              // no conf dir at all
		netErr bool              // the runtime reports NetworkReady false
		maxNum int               // the runtime's PluginMaxConfNum
		want   Status
		wantIn []string
	}{
		{"conflist and its plugins", map[string]string{"10-berth.conflist": goodConflist}, []string{"bridge", "portmap"}, false, false, 0, OK,
			[]string{`10-berth.conflist (network "berth": bridge, portmap) in `}},
		{"single .conf", map[string]string{"10-single.conf": goodConf}, []string{"bridge"}, false, false, 0, OK, []string{`network "single": bridge`}},
		{"no directory", nil, nil, true, false, 0, Fail, []string{"no network configuration"}},
		{"empty directory", map[string]string{"README": "not a config"}, nil, false, false, 0, Fail, []string{"no network configuration"}},
		{"plugin missing", map[string]string{"10-berth.conflist": goodConflist}, []string{"bridge"}, false, false, 0, Fail, []string{"plugin portmap not found in "}},
		{"broken file first", map[string]string{"05-bad.conflist": `{"name": "x", "plugins": [`, "10-berth.conflist": goodConflist}, []string{"bridge", "portmap"}, false, false, 0, Fail,
			[]string{"05-bad.conflist: not a JSON object", "the runtime stops at the first file it cannot load"}},
		{"broken file past the ones loaded", map[string]string{"10-berth.conflist": goodConflist, "99-bad.conf": "{"}, []string{"bridge", "portmap"}, false, false, 0, OK, []string{"10-berth.conflist"}},
		{"broken file read when the runtime loads two", map[string]string{"10-berth.conflist": goodConflist, "99-bad.conf": "{"}, []string{"bridge", "portmap"}, false, false, 2, Fail, []string{"99-bad.conf"}},
		{"network not ready", map[string]string{"10-berth.conflist": goodConflist}, []string{"bridge", "portmap"}, false, true, 0, Fail,
			[]string{"reports its network not ready: NetworkPluginNotReady: cni plugin not initialized"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			confDir, binDir := filepath.Join(root, "net.d"), filepath.Join(root, "bin")
			if !tt.notDir {
				if err := os.MkdirAll(confDir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, content := range tt.files {
				writeFile(t, filepath.Join(confDir, name), content, 0o644)
			}
			for _, b := range tt.bins {
				writeFile(t, filepath.Join(binDir, b), "#!/bin/sh\n", 0o755)
			}
			rt := newFakeRuntime(map[string]any{"cni": map[string]any{"confDir": confDir, "binDir": binDir, "maxConfNum": tt.maxNum}})
			if tt.netErr {
				rt.status.Status.Conditions[1] = &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Reason: "NetworkPluginNotReady", Message: "cni plugin not initialized"}
			}
			e := testEnv(t, rt, nil, Options{})
			checkResult(t, e.checkCNI(askedRuntime(t, e)), tt.want, tt.wantIn...)
		})
	}
}

// TestCNIDirs: Options win over what the runtime reports, go-cni's view
// over containerd's configuration, and libcni's defaults come last.
func TestCNIDirs(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		config   map[string]any
		cniInfo  string
		wantConf string
		wantBins string
		wantMax  int
	}{
		{"defaults", Options{}, nil, "", "/etc/cni/net.d", "/opt/cni/bin", 1},
		{"containerd 1.x config", Options{}, map[string]any{"cni": map[string]any{"confDir": "/c", "binDir": "/b", "maxConfNum": 3}}, "", "/c", "/b", 3},
		{"containerd 2.x config", Options{}, map[string]any{"cni": map[string]any{"confDir": "/c", "binDirs": []string{"/b1", "/b2"}}}, "", "/c", "/b1,/b2", 1},
		{"go-cni's view first", Options{}, map[string]any{"cni": map[string]any{"confDir": "/c", "binDir": "/b"}},
			`{"PluginDirs":["/g"],"PluginConfDir":"/gc","PluginMaxConfNum":2}`, "/gc", "/g", 2},
		{"options first", Options{CNIConfDir: "/o", CNIBinDirs: []string{"/ob"}}, map[string]any{"cni": map[string]any{"confDir": "/c", "binDir": "/b"}}, "", "/o", "/ob", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newFakeRuntime(tt.config)
			if tt.cniInfo != "" {
				rt.status.Info["cniconfig"] = tt.cniInfo
			}
			e := testEnv(t, rt, nil, tt.opts)
			conf, bins, maxConf := e.cniDirs(askedRuntime(t, e))
			if conf != tt.wantConf || strings.Join(bins, ",") != tt.wantBins || maxConf != tt.wantMax {
				t.Errorf("got %s %v %d, want %s %s %d", conf, bins, maxConf, tt.wantConf, tt.wantBins, tt.wantMax)
			}
		})
	}
}

// TestParseCNIConfig: the fields libcni requires, each refusal naming
// its field.
func TestParseCNIConfig(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		list    bool
		plugins string
		wantErr string
	}{
		{"conflist", goodConflist, true, "bridge,portmap", ""},
		{"conf", goodConf, false, "bridge", ""},
		{"conflist without name", `{"plugins": [{"type": "bridge"}]}`, true, "", `field "name": missing`},
		{"conflist without plugins", `{"name": "x", "plugins": []}`, true, "", `field "plugins": no plugins`},
		{"plugin without type", `{"name": "x", "plugins": [{"type": "bridge"}, {}]}`, true, "", `plugins[1]: field "type": missing`},
		{"plugin not an object", `{"name": "x", "plugins": ["bridge"]}`, true, "", "plugins[0]: not a JSON object"},
		{"conf without type", `{"name": "x"}`, false, "", `field "type": missing`},
		{"not JSON", `name: x`, true, "", "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := parseCNIConfig([]byte(tt.data), tt.list)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			case tt.wantErr == "" && strings.Join(n.Plugins, ",") != tt.plugins:
				t.Errorf("plugins %v, want %s", n.Plugins, tt.plugins)
			}
		})
	}
}

// FuzzParseCNIConfig: any bytes in the CNI directory give a network with a
// typed plugin or an error, never a panic.
func FuzzParseCNIConfig(f *testing.F) {
	f.Add([]byte(goodConflist), true)
	f.Add([]byte(goodConf), false)
	f.Add([]byte(`{"name": "x", "plugins": [null]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, list bool) {
		n, err := parseCNIConfig(data, list)
		if err != nil {
			return
		}
		if len(n.Plugins) == 0 {
			t.Fatalf("no plugins and no error for %q", data)
		}
		for _, p := range n.Plugins {
			if p == "" {
				t.Fatalf("a plugin without a type for %q", data)
			}
		}
	})
}
