package config

import (
	"sigs.k8s.io/yaml"

	"github.com/berth-agent/berth/internal/podspec"
)

// Marshal writes s as a versioned config file that reads back to s: the
// header first, then the fields in name order.
func (s Settings) Marshal() ([]byte, error) {
	body, err := yaml.Marshal(s)
	if err != nil {
		return nil, err
	}
	return append([]byte("apiVersion: "+APIVersion+"\nkind: "+Kind+"\n"), body...), nil
}

// Redacted is s fit to print: header values (they carry tokens) replaced
// by REDACTED, and the URLs' credentials and query values removed as
// podspec.RedactURL removes them.
func (s Settings) Redacted() Settings {
	s.ManifestURLHeader = redactHeader(s.ManifestURLHeader)
	s.StatusURLHeader = redactHeader(s.StatusURLHeader)
	if s.ManifestURL != "" {
		s.ManifestURL = podspec.RedactURL(s.ManifestURL)
	}
	if s.StatusURL != "" {
		s.StatusURL = podspec.RedactURL(s.StatusURL)
	}
	return s
}

// redactHeader keeps the header names and the number of values.
func redactHeader(h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		r := make([]string, len(vs))
		for i := range r {
			r[i] = "REDACTED"
		}
		out[k] = r
	}
	return out
}
