package bench

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
)

// figBinary reports the size of the agent's binary (the first word of its
// command line), and whether it is stripped, since the size is only
// comparable between stripped binaries.
func (r *runner) figBinary(context.Context) error {
	args, err := r.agentArgs(fileAgent)
	if err != nil {
		return err
	}
	path := args[0]
	if path == r.bin {
		path = r.opts.Bin // the copy has the same size; name the original
	}
	path, err = exec.LookPath(path)
	if err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	stripped := "unknown"
	if f, err := elf.Open(path); err == nil {
		stripped = map[bool]string{true: "stripped", false: "NOT stripped"}[f.Section(".symtab") == nil]
		f.Close()
	}
	mib := float64(fi.Size()) / (1 << 20)
	r.res.add("binary size", "MiB", []float64{mib}, &Target{Text: "< 30 MB", Limit: 30e6 / (1 << 20)}, "79 MB")
	r.res.note("binary %s: %d bytes (%.1f MB, %.2f MiB), %s", path, fi.Size(), float64(fi.Size())/1e6, mib, stripped)
	return nil
}
