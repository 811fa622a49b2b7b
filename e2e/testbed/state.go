package testbed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// stateFile, in the bed's Dir, records what teardown needs to find the
// bed's processes and network from another process (`testbed down`).
const stateFile = "bed.json"

// bedState is the content of stateFile.
type bedState struct {
	Socket      string  `json:"socket"`
	Network     network `json:"network"`
	Snapshotter string  `json:"snapshotter"`
	Registry    string  `json:"registry,omitempty"`
	// Containerd is the containerd version the bed runs, so a restart
	// after Attach runs the same binaries.
	Containerd        runtimeVersion `json:"containerd"`
	ContainerdVersion string         `json:"containerdVersion,omitempty"`
	ContainerdPID     int            `json:"containerdPID,omitempty"`
	RegistryPID       int            `json:"registryPID,omitempty"`
	// Owner is the process a temporary bed dies with; nil for a bed in a
	// chosen Dir (`testbed up`), which is meant to outlive its starter.
	Owner *owner `json:"owner,omitempty"`
}

// saveState writes the state file.
func (b *Bed) saveState() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.saveStateLocked()
}

// saveStateLocked writes the state file; b.mu must be held. It writes a
// temporary file and renames it, so a reader never sees half a state.
func (b *Bed) saveStateLocked() error {
	st := bedState{
		Socket:      b.Socket,
		Network:     b.network,
		Snapshotter: b.snapshotter,
		Registry:    b.Registry,
		Owner:       b.owner,
		Containerd:  b.version,

		ContainerdVersion: b.ContainerdVersion,
	}
	if b.containerd != nil {
		st.ContainerdPID = b.containerd.PID
	}
	if b.registry != nil {
		st.RegistryPID = b.registry.PID
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("marshal bed state: %w", err)
	}
	tmp := b.path(stateFile + ".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write bed state: %w", err)
	}
	if err := os.Rename(tmp, b.path(stateFile)); err != nil {
		return fmt.Errorf("write bed state: %w", err)
	}
	return nil
}

// Attach returns the bed that another process (`testbed up`) started in
// dir, from its state file, so that it can be used or closed from here.
func Attach(dir string) (*Bed, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("bed dir: %w", err)
	}
	return attach(dir, filepath.Join(dir, stateFile))
}

// readState reads a state file.
func readState(file string) (bedState, error) {
	var st bedState
	data, err := os.ReadFile(file)
	if err != nil {
		return st, fmt.Errorf("read bed state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("parse bed state %s: %w", file, err)
	}
	return st, nil
}

// attach rebuilds the bed in dir from the state file at state.
func attach(dir, state string) (*Bed, error) {
	st, err := readState(state)
	if err != nil {
		return nil, err
	}
	b := &Bed{
		Dir:          dir,
		Socket:       st.Socket,
		Endpoint:     "unix://" + st.Socket,
		BusyboxImage: BusyboxRef,
		PauseImage:   PauseRef,
		Registry:     st.Registry,
		Bridge:       st.Network.Bridge,
		Subnet:       st.Network.Subnet,
		network:      st.Network,
		snapshotter:  st.Snapshotter,
		owner:        st.Owner,
		version:      st.Containerd,

		ContainerdVersion: st.ContainerdVersion,
	}
	if st.Registry != "" {
		b.RegistryBusyboxImage = st.Registry + "/library/busybox:1.36"
	}
	if st.ContainerdPID != 0 {
		b.containerd = &process{PID: st.ContainerdPID, Marker: b.configPath()}
	}
	if st.RegistryPID != 0 {
		b.registry = &process{PID: st.RegistryPID, Marker: b.registryConfigPath()}
	}
	if b.conn, err = dial(b.Endpoint); err != nil {
		return nil, err
	}
	return b, nil
}

// dial opens a gRPC connection to endpoint that retries quickly, so it
// follows containerd across a restart within a fraction of a second.
func dial(endpoint string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoffConfig,
			MinConnectTimeout: 2 * time.Second,
		}))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	return conn, nil
}
