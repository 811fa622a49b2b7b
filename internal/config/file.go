package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/podspec"
)

// berth's config file is a versioned document:
//
//	apiVersion: berth.io/v1alpha1
//	kind: BerthConfiguration
//	staticPodPath: /etc/kubernetes/manifests
//
// A file with neither apiVersion nor kind (and one with the kind alone)
// is the unversioned form berth read first: still read, with a warning.
// Each field is decoded from the YAML node tree on its own, so every
// problem is reported at once as FILE:LINE: field: message, and a wrong
// type is said in words ("must be an integer, got string").
const (
	// APIVersion is the config file's apiVersion.
	APIVersion = "berth.io/v1alpha1"
	// Kind is the config file's kind.
	Kind = "BerthConfiguration"
	// kubeletKind is the kind of a kubelet config file, whose static-pod
	// fields berth reads.
	kubeletKind = "KubeletConfiguration"
)

// Field names follow one rule: the kubelet's KubeletConfiguration name
// where one exists (staticPodPath, staticPodURL, staticPodURLHeader,
// crashLoopBackOff spelt as the kubelet spells it); a berth setting that
// qualifies a manifest source extends that source's kubelet name
// (staticPodURLCA beside staticPodURL); any other setting is its flag's
// name in lowerCamelCase with initialisms upper-case (statusURLCA).
// renamedKeys maps each older name to its current one: an older name is
// still read, with a warning naming the file, the line and the new name.
var renamedKeys = map[string]string{
	"podManifestAllowedSigners": "staticPodPathAllowedSigners",
	"manifestPermissions":       "staticPodPathPermissions",
	"manifestURLCA":             "staticPodURLCA",
	"manifestURLAllowedSigners": "staticPodURLAllowedSigners",
	"httpCheckBackoffMax":       "httpCheckBackOffMax",
	"crashLoopBackoffInitial":   "crashLoopBackOffInitial",
	"crashLoopBackoffMax":       "crashLoopBackOffMax",
}

// RenamedKeys lists the renamed config file fields, old name to new, for
// the documentation.
func RenamedKeys() map[string]string {
	out := make(map[string]string, len(renamedKeys))
	for k, v := range renamedKeys {
		out[k] = v
	}
	return out
}

// FileError is one problem of a config file, printed as
// FILE:LINE: field: message like a manifest's.
type FileError struct {
	Path  string
	Line  int // 0 when unknown
	Field string
	Msg   string
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// settingField is one config file field: where it lives in Settings.
type settingField struct {
	index []int
	typ   reflect.Type
}

// settingFields maps every config file field to its Settings field,
// embedded structs flattened as their inline tags say.
var settingFields = sync.OnceValue(func() map[string]settingField {
	out := map[string]settingField{}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			index := append(append([]int(nil), prefix...), i)
			if f.Anonymous && name == "" {
				walk(f.Type, index)
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			out[name] = settingField{index: index, typ: f.Type}
		}
	}
	walk(reflect.TypeFor[Settings](), nil)
	return out
})

// fileLines are the lines of the fields one config file set, by their
// current names, for errors found after decoding (validation).
type fileLines struct {
	path  string
	lines map[string]int
	// problems are the fields that could not be read; the others were.
	problems []error
	// warnings are what the file should say otherwise (an unversioned
	// header, an older field name, kubelet fields berth does not use);
	// the file is read all the same.
	warnings []string
}

// LoadConfigFile overlays the file's settings on s. A berth config is read
// strictly, every problem reported with its line; a kubelet
// KubeletConfiguration is read as --kubelet-config reads one
// (kubeletconfig.go). It returns the file's warnings (an unversioned
// file, an older field name) whether or not it also returns an error.
func LoadConfigFile(path string, s *Settings) ([]string, error) {
	f, err := loadConfigFile(path, s)
	if err != nil {
		return nil, err
	}
	return f.warnings, errors.Join(f.problems...)
}

func loadConfigFile(path string, s *Settings) (fileLines, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return fileLines{}, fmt.Errorf("config file: %w", err)
	}
	return decodeConfigFile(path, data, s)
}

// decodeConfigFile tells berth's own file from a kubelet's by its header
// and decodes it into s. The error is a file berth cannot read at all;
// fields it cannot read are the result's problems, the others are read.
func decodeConfigFile(path string, data []byte, s *Settings) (fileLines, error) {
	doc, err := parseDocument(path, data)
	if err != nil || doc == nil {
		if err != nil {
			return fileLines{}, err
		}
		return fileLines{path: path, warnings: []string{unversionedWarning(path, 0)}}, nil
	}
	header := map[string]*yamlv3.Node{}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if k := doc.Content[i].Value; (k == "apiVersion" || k == "kind") && header[k] == nil {
			header[k] = doc.Content[i]
			header[k+"="] = doc.Content[i+1]
		}
	}
	kind, apiVersion := scalarOf(header["kind="]), scalarOf(header["apiVersion="])
	var warnings []string
	switch {
	case kind == kubeletKind:
		return decodeKubeletConfig(path, doc, s)
	case kind == Kind && apiVersion == APIVersion:
	case kind == "" && header["apiVersion"] == nil, kind == Kind && header["apiVersion"] == nil:
		line := 0
		if header["kind"] != nil {
			line = header["kind"].Line
		}
		warnings = append(warnings, unversionedWarning(path, line))
	case kind == Kind || (header["kind"] == nil && apiVersion != APIVersion):
		return fileLines{}, &FileError{Path: path, Line: header["apiVersion"].Line, Field: "apiVersion",
			Msg: fmt.Sprintf("want %s (kind %s), got %q", APIVersion, Kind, apiVersion)}
	case header["kind"] == nil:
		return fileLines{}, &FileError{Path: path, Line: header["apiVersion"].Line, Field: "kind", Msg: "missing: want " + Kind}
	default:
		return fileLines{}, &FileError{Path: path, Line: header["kind"].Line, Field: "kind",
			Msg: fmt.Sprintf("want %s (or a kubelet's %s), got %q", Kind, kubeletKind, kind)}
	}
	lines, renamed, problems := decodeFields(path, doc, s, nil)
	return fileLines{path: path, lines: lines, problems: problems, warnings: append(warnings, renamed...)}, nil
}

// unversionedWarning asks for the versioned header.
func unversionedWarning(path string, line int) string {
	where := path
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	return fmt.Sprintf("%s: a config file without apiVersion is deprecated: begin it with apiVersion: %s and kind: %s", where, APIVersion, Kind)
}

// syntaxErrorLine finds the line in go-yaml's syntax errors.
var syntaxErrorLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseDocument parses the file's one document: nil for an empty file,
// else a mapping node. A syntax error names its line.
func parseDocument(path string, data []byte) (*yamlv3.Node, error) {
	var root, second yamlv3.Node
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(&root)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err == nil {
		if err = dec.Decode(&second); errors.Is(err, io.EOF) {
			err = nil
		} else if err == nil && !(len(second.Content) == 1 && second.Content[0].Tag == "!!null") {
			return nil, &FileError{Path: path, Line: second.Line, Msg: "a config file is one document: remove this second one"}
		}
	}
	if err != nil {
		msg := err.Error()
		if m := syntaxErrorLine.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &FileError{Path: path, Line: podspec.SyntaxLine(data, line, m[2]), Msg: m[2]}
		}
		return nil, &FileError{Path: path, Msg: strings.TrimPrefix(msg, "yaml: ")}
	}
	if len(root.Content) == 0 {
		return nil, nil
	}
	doc := resolveAlias(root.Content[0])
	if doc.Kind == yamlv3.ScalarNode && doc.Tag == "!!null" {
		return nil, nil
	}
	if doc.Kind != yamlv3.MappingNode {
		return nil, &FileError{Path: path, Line: doc.Line, Msg: fmt.Sprintf("must be a mapping of settings (a %s), got %s", Kind, describeNode(doc))}
	}
	return doc, nil
}

// decodeFields decodes each field of doc into s. Fields that are no
// setting go to other when it is given (a kubelet file's own fields),
// else they are errors. It returns the line of each field set, by its
// current name, a warning for each field given by an older name, and
// every problem.
func decodeFields(path string, doc *yamlv3.Node, s *Settings, other func(key, value *yamlv3.Node) error) (map[string]int, []string, []error) {
	fields := settingFields()
	lines := map[string]int{}
	seen := map[string]int{}
	var warnings []string
	var errs []error
	for i := 0; i+1 < len(doc.Content); i += 2 {
		keyNode, value := resolveAlias(doc.Content[i]), doc.Content[i+1]
		key := keyNode.Value
		if keyNode.Kind != yamlv3.ScalarNode {
			errs = append(errs, &FileError{Path: path, Line: keyNode.Line, Msg: "a field name must be a string, got " + describeNode(keyNode)})
			continue
		}
		if first, dup := seen[key]; dup {
			errs = append(errs, &FileError{Path: path, Line: keyNode.Line, Field: key, Msg: fmt.Sprintf("given twice (first on line %d)", first)})
			continue
		}
		seen[key] = keyNode.Line
		if key == "apiVersion" || key == "kind" {
			continue
		}
		name := key
		if renamed, ok := renamedKeys[key]; ok {
			name = renamed
			warnings = append(warnings, fmt.Sprintf("%s:%d: %s is deprecated: rename it %s", path, keyNode.Line, key, name))
		}
		if first, dup := lines[name]; dup {
			errs = append(errs, &FileError{Path: path, Line: keyNode.Line, Field: key, Msg: fmt.Sprintf("sets %s, which line %d sets too: keep only %s", name, first, name)})
			continue
		}
		field, ok := fields[name]
		if !ok {
			if other != nil {
				if err := other(keyNode, value); err != nil {
					errs = append(errs, err)
				} else {
					lines[key] = keyNode.Line
				}
				continue
			}
			errs = append(errs, &FileError{Path: path, Line: keyNode.Line, Field: key, Msg: "unknown field" + suggest(key)})
			continue
		}
		lines[name] = keyNode.Line
		target := reflect.ValueOf(s).Elem().FieldByIndex(field.index)
		if err := decodeValue(value, target, key); err != nil {
			for _, fe := range fileErrors(err) {
				fe.Path = path
				errs = append(errs, fe)
			}
		}
	}
	return lines, warnings, errs
}

// suggest names the known field closest to an unknown one, when one is
// close enough to be a typo.
func suggest(key string) string {
	best, bestDist := "", len(key)/3+1
	candidates := make([]string, 0, len(settingFields())+len(renamedKeys)+2)
	for k := range settingFields() {
		candidates = append(candidates, k)
	}
	candidates = append(candidates, "apiVersion", "kind")
	sort.Strings(candidates)
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(key), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var durationType = reflect.TypeFor[metav1.Duration]()

// decodeValue decodes node into target, a settings field of one of the
// types Settings uses; a null leaves it as it is. name is the field's
// path, for errors inside lists and maps.
func decodeValue(node *yamlv3.Node, target reflect.Value, name string) error {
	node = resolveAlias(node)
	if node.Kind == yamlv3.ScalarNode && node.Tag == "!!null" {
		return nil
	}
	switch {
	case target.Type() == durationType:
		if node.Kind != yamlv3.ScalarNode {
			return fieldErr(node, name, "must be a duration such as 20s or 1m30s, got "+describeNode(node))
		}
		d, err := time.ParseDuration(node.Value)
		if err != nil {
			return fieldErr(node, name, fmt.Sprintf("must be a duration such as 20s or 1m30s, got %q", node.Value))
		}
		target.Set(reflect.ValueOf(metav1.Duration{Duration: d}))
	case target.Kind() == reflect.String:
		if node.Kind != yamlv3.ScalarNode {
			return fieldErr(node, name, "must be a string, got "+describeNode(node))
		}
		target.SetString(node.Value)
	case target.Kind() == reflect.Int:
		var n int
		if node.Kind != yamlv3.ScalarNode || node.Tag != "!!int" || node.Decode(&n) != nil {
			return fieldErr(node, name, "must be an integer, got "+describeNode(node))
		}
		target.SetInt(int64(n))
	case target.Kind() == reflect.Bool:
		var b bool
		if node.Kind != yamlv3.ScalarNode || node.Tag != "!!bool" || node.Decode(&b) != nil {
			return fieldErr(node, name, "must be true or false, got "+describeNode(node))
		}
		target.SetBool(b)
	case target.Kind() == reflect.Slice:
		if node.Kind != yamlv3.SequenceNode {
			return fieldErr(node, name, "must be a list, got "+describeNode(node))
		}
		list := reflect.MakeSlice(target.Type(), len(node.Content), len(node.Content))
		var errs []error
		for i, item := range node.Content {
			if err := decodeValue(item, list.Index(i), fmt.Sprintf("%s[%d]", name, i)); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		target.Set(list)
	case target.Kind() == reflect.Map:
		if node.Kind != yamlv3.MappingNode {
			return fieldErr(node, name, "must be a mapping, got "+describeNode(node))
		}
		m := reflect.MakeMapWithSize(target.Type(), len(node.Content)/2)
		var errs []error
		for i := 0; i+1 < len(node.Content); i += 2 {
			k := resolveAlias(node.Content[i])
			if k.Kind != yamlv3.ScalarNode {
				errs = append(errs, fieldErr(k, name, "keys must be strings, got "+describeNode(k)))
				continue
			}
			v := reflect.New(target.Type().Elem()).Elem()
			if err := decodeValue(node.Content[i+1], v, name+"."+k.Value); err != nil {
				errs = append(errs, err)
				continue
			}
			m.SetMapIndex(reflect.ValueOf(k.Value), v)
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		target.Set(m)
	case target.Kind() == reflect.Struct:
		return decodeStruct(node, target, name)
	default:
		return fieldErr(node, name, fmt.Sprintf("settings of type %s cannot be read from a file", target.Type()))
	}
	return nil
}

// decodeStruct decodes a mapping into a setting made of parts (a taint),
// part by part under the parts' JSON names; an unknown part is an error
// naming its line, as an unknown field is.
func decodeStruct(node *yamlv3.Node, target reflect.Value, name string) error {
	if node.Kind != yamlv3.MappingNode {
		return fieldErr(node, name, "must be a mapping, got "+describeNode(node))
	}
	parts := map[string]int{}
	for i := range target.NumField() {
		f := target.Type().Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); f.IsExported() && tag != "" && tag != "-" {
			parts[tag] = i
		}
	}
	var errs []error
	for i := 0; i+1 < len(node.Content); i += 2 {
		k := resolveAlias(node.Content[i])
		idx, ok := parts[k.Value]
		if k.Kind != yamlv3.ScalarNode || !ok {
			errs = append(errs, fieldErr(k, name, fmt.Sprintf("unknown field %q", k.Value)))
			continue
		}
		if err := decodeValue(node.Content[i+1], target.Field(idx), name+"."+k.Value); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fileErrors flattens decodeValue's joined errors, all *FileError.
func fileErrors(err error) []*FileError {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*FileError
		for _, e := range joined.Unwrap() {
			out = append(out, fileErrors(e)...)
		}
		return out
	}
	if fe, ok := errors.AsType[*FileError](err); ok {
		return []*FileError{fe}
	}
	return []*FileError{{Msg: err.Error()}}
}

// fieldErr is a problem of one value; decodeFields adds the path.
func fieldErr(node *yamlv3.Node, name, msg string) error {
	return &FileError{Line: node.Line, Field: name, Msg: msg}
}

// describeNode says what a node is, in words, with a scalar's value.
func describeNode(n *yamlv3.Node) string {
	n = resolveAlias(n)
	switch n.Kind {
	case yamlv3.MappingNode:
		return "a mapping"
	case yamlv3.SequenceNode:
		return "a list"
	case yamlv3.ScalarNode:
		kind := map[string]string{"!!int": "integer", "!!float": "number", "!!bool": "boolean", "!!null": "null", "!!str": "string"}[n.Tag]
		if kind == "" {
			kind = "value"
		}
		if kind == "null" {
			return kind
		}
		return fmt.Sprintf("%s %q", kind, n.Value)
	}
	return "nothing"
}

// resolveAlias follows an alias to the node it names.
func resolveAlias(n *yamlv3.Node) *yamlv3.Node {
	for n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// scalarOf is a scalar node's value, "" for anything else.
func scalarOf(n *yamlv3.Node) string {
	if n == nil {
		return ""
	}
	if n = resolveAlias(n); n.Kind != yamlv3.ScalarNode {
		return ""
	}
	return n.Value
}
