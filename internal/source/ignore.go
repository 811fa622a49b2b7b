package source

import (
	"path/filepath"
	"strings"
)

// isManifestName reports whether a file in the manifest directory is read.
// Only .yaml, .yml and .json files count, so an editor's leftovers or an
// operator's web.yaml.backup never shadow the real manifest (the kubelet
// reads every non-dot file, a long-standing trap). Dotfiles are skipped:
// they are hidden by convention, and the ..data/..2024_* entries of a
// mounted ConfigMap are dot-prefixed. vim's 4913 probe, emacs' #web.yaml#
// and .#web.yaml and the *~ and *.swp backups fail these rules anyway;
// they are named so the rules are easy to check.
func isManifestName(name string) bool {
	if name == "" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") ||
		strings.HasSuffix(name, "~") || strings.HasSuffix(name, ".swp") || name == "4913" {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
