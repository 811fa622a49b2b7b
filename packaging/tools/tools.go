//go:build tools

// Package tools pins the release tools `make release` runs (nfpm packages
// the .deb and .rpm files, cyclonedx-gomod writes the SBOM). They live in
// this module of their own so that neither reaches berth's go.mod, go.sum
// or binary.
package tools

import (
	_ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
	_ "github.com/goreleaser/nfpm/v2/cmd/nfpm"
)
