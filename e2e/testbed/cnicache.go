package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CNICacheFiles lists libcni's cached results of one sandbox in the bed's
// network (one per interface), which a CNI DEL of the sandbox reads.
func (b *Bed) CNICacheFiles(sandboxID string) ([]string, error) {
	if b.network.Name == "" {
		return nil, errors.New("the bed has no CNI network")
	}
	return filepath.Glob(filepath.Join(cniResultsDir, b.network.Name+"-"+sandboxID+"-*"))
}

// RepairCNICache removes the cached results of the bed's network that are
// not JSON, and returns their paths. A runtime killed while libcni wrote
// one leaves it empty or cut short; libcni before 1.2 (containerd 1.6's)
// then fails every CNI DEL of that sandbox, so the runtime can neither stop
// nor remove it (containernetworking/cni#1055), until an operator removes
// the file, as this does. Newer libcni removes such a file itself.
func (b *Bed) RepairCNICache() ([]string, error) {
	if b.network.Name == "" {
		return nil, nil
	}
	return repairCNIResults(cniResultsDir, b.network.Name)
}

// repairCNIResults is RepairCNICache over the results in dir of network.
func repairCNIResults(dir, network string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, network+"-*"))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the sandbox's DEL removed it meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if json.Valid(data) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove broken CNI result: %w", err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
