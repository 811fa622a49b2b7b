package testbed

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRepairCNIResults: only the bed network's results that are not JSON
// go; a whole result, and anything of another network, stays.
func TestRepairCNIResults(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"berth-testbed-7-aaa-eth0":  `{"kind":"cniCacheV1","result":{"cniVersion":"1.0.0"}}`,
		"berth-testbed-7-bbb-eth0":  "",
		"berth-testbed-7-ccc-eth0":  `{"kind":"cniCacheV1","res`,
		"berth-testbed-70-ddd-eth0": "",
		"other-net-eee-eth0":        "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := repairCNIResults(dir, "berth-testbed-7")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{filepath.Join(dir, "berth-testbed-7-bbb-eth0"), filepath.Join(dir, "berth-testbed-7-ccc-eth0")}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	slices.Sort(left)
	if want := []string{"berth-testbed-7-aaa-eth0", "berth-testbed-70-ddd-eth0", "other-net-eee-eth0"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
