package source

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-agent/berth/internal/source/signature"
	"github.com/berth-agent/berth/internal/source/sourcemetrics"
)

// SignatureNamespace is the namespace manifests are signed in
// (ssh-keygen -Y sign -n berth-manifest).
const SignatureNamespace = signature.Namespace

// SerialPrefix starts the first line of a signed body, followed by its
// serial: "# berth.io/serial: 42".
const SerialPrefix = signature.SerialPrefix

// Metrics are the sources' series, recorded by both sources.
type Metrics = sourcemetrics.Metrics

// NewMetrics registers the sources' series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics { return sourcemetrics.New(reg) }

// Signers are the keys a signed source accepts.
type Signers = signature.Signers

// LoadAllowedSigners reads the allowed signers file at path, which must be
// root's and written by no one else.
func LoadAllowedSigners(path string) (*Signers, error) {
	return signature.LoadAllowedSigners(path)
}

// ParseAllowedSigners parses an allowed signers file; name is its name,
// for errors.
func ParseAllowedSigners(data []byte, name string) (*Signers, error) {
	return signature.ParseAllowedSigners(data, name)
}

// newSignedOrigin returns the signature check of a source, or nil when no
// signers are configured and bodies need no signature.
func newSignedOrigin(signers *Signers, cfg Config, source string, log *slog.Logger) *signature.Origin {
	if signers == nil {
		return nil
	}
	return signature.NewOrigin(signers, signature.NewSerials(cfg.StateDir, source, cfg.clock(), log), cfg.Metrics.Signatures(), source, log)
}
