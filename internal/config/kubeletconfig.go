package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// A kubelet KubeletConfiguration file (--kubelet-config, or --config when
// its kind says so) gives berth two kinds of fields: those with the same
// name and meaning as a berth setting (staticPodPath, maxPods, ...; every
// settings field is read), and the kubelet-only fields in kubeletFields,
// which map onto settings in apply. The fields berth reads are decoded
// strictly, each error naming the file, the line and the field; every
// other field is listed, with its line, in one warning, since a kubelet
// config carries many fields a standalone agent has no use for.
//
// To honour another kubelet field, add it to kubeletFields, check it in
// validate and map it in apply.

// kubeletFields are the KubeletConfiguration fields berth honours that are
// not berth settings of the same name.
type kubeletFields struct {
	// CrashLoopBackOff is the kubelet's crash-loop back-off ceiling
	// (KEP-5593, beta and on by default in 1.35).
	CrashLoopBackOff *kubeletCrashLoopBackOff `json:"crashLoopBackOff,omitempty"`
}

// kubeletCrashLoopBackOff is the kubelet's CrashLoopBackOffConfig.
type kubeletCrashLoopBackOff struct {
	MaxContainerRestartPeriod *metav1.Duration `json:"maxContainerRestartPeriod,omitempty"`
}

// The kubelet's bounds on maxContainerRestartPeriod.
const (
	minContainerRestartPeriod = time.Second
	maxContainerRestartPeriod = 300 * time.Second
)

// validate checks the kubelet-only fields as the kubelet does; line finds
// a field's line for the error.
func (k *kubeletFields) validate(path string, line func(key string) int) error {
	if k.CrashLoopBackOff != nil && k.CrashLoopBackOff.MaxContainerRestartPeriod != nil {
		d := k.CrashLoopBackOff.MaxContainerRestartPeriod.Duration
		if d < minContainerRestartPeriod || d > maxContainerRestartPeriod {
			return fmt.Errorf("%s:%d: crashLoopBackOff.maxContainerRestartPeriod: must be between %s and %s, got %s",
				path, line("crashLoopBackOff"), minContainerRestartPeriod, maxContainerRestartPeriod, d)
		}
	}
	return nil
}

// apply maps the kubelet-only fields onto berth's settings:
// maxContainerRestartPeriod is the node-wide crash-loop ceiling
// (--crashloop-backoff-max), and, as in the kubelet, also lowers the
// initial delay when it is below it.
func (k *kubeletFields) apply(s *Settings) {
	if k.CrashLoopBackOff != nil && k.CrashLoopBackOff.MaxContainerRestartPeriod != nil {
		d := k.CrashLoopBackOff.MaxContainerRestartPeriod.Duration
		s.CrashLoopBackoffMax = metav1.Duration{Duration: d}
		if d < s.CrashLoopBackoffInitial.Duration {
			s.CrashLoopBackoffInitial = metav1.Duration{Duration: d}
		}
	}
}

// loadKubeletConfig reads a KubeletConfiguration file into s.
func loadKubeletConfig(path string, s *Settings) (fileLines, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return fileLines{}, fmt.Errorf("kubelet config file: %w", err)
	}
	doc, err := parseDocument(path, data)
	if err != nil {
		return fileLines{}, err
	}
	if doc == nil {
		return fileLines{}, fmt.Errorf("kubelet config file %s: empty", path)
	}
	return decodeKubeletConfig(path, doc, s)
}

// decodeKubeletConfig decodes the fields berth reads, each on its own so
// every error names its line, and warns about the others in one line.
func decodeKubeletConfig(path string, doc *yamlv3.Node, s *Settings) (fileLines, error) {
	var kind string
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "kind" {
			kind = scalarOf(doc.Content[i+1])
		}
	}
	if kind != kubeletKind {
		return fileLines{}, fmt.Errorf("kubelet config file %s: kind %q, want %s", path, kind, kubeletKind)
	}
	var ignored []string
	var own kubeletFields
	lines, warnings, problems := decodeFields(path, doc, s, func(key, value *yamlv3.Node) error {
		switch key.Value {
		case "crashLoopBackOff":
			var v any
			if err := value.Decode(&v); err != nil {
				return &FileError{Path: path, Line: key.Line, Field: key.Value, Msg: err.Error()}
			}
			field, err := json.Marshal(map[string]any{key.Value: v})
			if err == nil {
				err = yaml.UnmarshalStrict(field, &own)
			}
			if err != nil {
				return &FileError{Path: path, Line: key.Line, Field: key.Value, Msg: unwrapYAML(err).Error()}
			}
		default:
			ignored = append(ignored, fmt.Sprintf("%s (line %d)", key.Value, key.Line))
		}
		return nil
	})
	if err := own.validate(path, func(k string) int { return lines[k] }); err != nil {
		problems = append(problems, err)
	} else {
		own.apply(s)
	}
	if len(ignored) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: KubeletConfiguration fields berth does not use: %s", path, strings.Join(ignored, ", ")))
	}
	return fileLines{path: path, lines: lines, problems: problems, warnings: warnings}, nil
}

// unwrapYAML drops sigs.k8s.io/yaml's "error unmarshaling JSON: while
// decoding JSON: " prefixes, which say nothing to whoever wrote YAML.
func unwrapYAML(err error) error {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return errors.New(msg)
}
