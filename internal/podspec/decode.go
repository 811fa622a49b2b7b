package podspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"
)

// DefaultMaxBytes is the size limit of one manifest file or HTTP body when
// the configuration sets none.
const DefaultMaxBytes = 10 << 20

// Problem reasons of the decoding stage.
const (
	ReasonDecodeError = "DecodeError"
	ReasonTooLarge    = "TooLarge"
	ReasonEmpty       = "Empty"
)

// decoded is one pod exactly as the manifest states it, with the YAML node
// it came from so later stages can point at lines.
type decoded struct {
	pod  *v1.Pod
	obj  *Object // a ConfigMap or Secret instead of a pod
	node *yaml.Node
	// prefix locates the pod in its document: "items[2]." inside a
	// PodList, "" for a Pod document.
	prefix string
}

// decodeManifests reads a YAML or JSON manifest holding one Pod, a PodList
// (or a v1 List of Pods), or a stream of such documents separated by "---".
// Decoding is strict: unknown or duplicate fields and wrong types reject
// the pod, with the line and field path in the Problem. A problem's Name
// and Namespace are the manifest's own (without the node suffix) when the
// document got that far. A syntax error ends the stream: what follows it
// cannot be trusted. With limit > 0, a manifest holding more than limit
// documents or pods (PodList items count) yields one TooManyDocuments
// problem and nothing else, found before their pods are decoded.
//
// secret reports whether the manifest holds a Secret, valid or not, or
// may (its parse stopped early and mightHoldSecret): who may read it
// matters (see the source's checkSecretFile).
func decodeManifests(data []byte, origin Origin, limit int) (docs []decoded, problems []Problem, secret bool) {
	problem := func(line int, fieldPath, msg string, node *yaml.Node) {
		problems = append(problems, decodeProblem(origin, line, fieldPath, msg, node))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	sawDocument := false
	count := 0 // documents and list items so far
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if count++; limit > 0 && count > limit {
			return nil, []Problem{tooManyDocuments(origin, limit)}, mightHoldSecret(data)
		}
		if err != nil {
			line, msg := yamlErrorLine(err)
			line = SyntaxLine(data, line, strings.TrimPrefix(msg, yamlPrefix))
			if m := unknownAnchorRE.FindStringSubmatch(strings.TrimPrefix(msg, yamlPrefix)); m != nil {
				line = max(aliasLine(data, m[1]), line)
			}
			if mightHoldSecret(data) {
				msg = withholdYAML(msg)
			}
			problem(line, "", msg, nil)
			return docs, problems, secret || mightHoldSecret(data)
		}
		root := &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			continue // an empty document, e.g. after a trailing "---"
		}
		sawDocument = true
		if root.Kind != yaml.MappingNode {
			problem(root.Line, "", "a manifest must be a Pod or a PodList object, got a "+jsonKindOf(root), nil)
			continue
		}
		apiVersion, kind := scalarAt(root, "apiVersion"), scalarAt(root, "kind")
		if apiVersion == "" || kind == "" {
			problem(root.Line, "", "apiVersion and kind are required: a manifest starts with \"apiVersion: v1\" and \"kind: Pod\" (or PodList)", root)
			continue
		}
		// The kind first: apiVersion is only wrong for a kind berth reads.
		if !readKinds[kind] {
			problem(lineOf(root, "kind"), "kind", fmt.Sprintf("berth runs Pods (and PodLists, ConfigMaps, Secrets); %s is not run: use a Pod", kind), nil)
			continue
		}
		if apiVersion != "v1" {
			problem(lineOf(root, "apiVersion"), "apiVersion", fmt.Sprintf("must be \"v1\", got %q", apiVersion), root)
			continue
		}
		switch kind {
		case "Pod":
			pod, errs := decodePod(root, false)
			for _, p := range errs {
				problem(p.Line, p.Field, p.Message, root)
			}
			if pod != nil {
				docs = append(docs, decoded{pod: pod, node: root})
			}
		case "PodList", "List":
			if _, items := child(root, pathSegment{key: "items"}); items != nil && items.Kind == yaml.SequenceNode {
				// The items count instead of the document holding them.
				if count += max(len(items.Content)-1, 0); limit > 0 && count > limit {
					return nil, []Problem{tooManyDocuments(origin, limit)}, mightHoldSecret(data)
				}
				for _, item := range items.Content {
					secret = secret || item.Kind == yaml.MappingNode && mightBeSecret(item)
				}
			}
			docs, problems = decodeList(root, kind, origin, docs, problems)
		case KindConfigMap, KindSecret:
			secret = secret || kind == KindSecret
			obj, errs := decodeObject(root, kind)
			for _, p := range errs {
				problems = append(problems, objectDecodeProblem(origin, p, "", kind, root))
			}
			if obj != nil {
				docs = append(docs, decoded{obj: obj, node: root})
			}
		}
	}
	if !sawDocument && len(problems) == 0 {
		problems = append(problems, Problem{Source: origin.Source, Origin: origin.Path, Line: 1, Reason: ReasonEmpty,
			Message: "manifest holds no document"})
	}
	return docs, problems, secret
}

// readKinds are the kinds of top-level document berth reads.
var readKinds = map[string]bool{"Pod": true, "PodList": true, "List": true, KindConfigMap: true, KindSecret: true}

// decodeList decodes the items of a PodList or List, each on its own: one
// bad item does not reject its siblings.
func decodeList(root *yaml.Node, kind string, origin Origin, docs []decoded, problems []Problem) ([]decoded, []Problem) {
	add := func(line int, fieldPath, msg string, node *yaml.Node) {
		problems = append(problems, decodeProblem(origin, line, fieldPath, msg, node))
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch k := root.Content[i].Value; k {
		case "apiVersion", "kind", "metadata", "items":
		default:
			add(root.Content[i].Line, k, "unknown field in a "+kind, nil)
		}
	}
	_, items := child(root, pathSegment{key: "items"})
	if items == nil || (items.Kind == yaml.ScalarNode && items.ShortTag() == "!!null") {
		return docs, problems
	}
	if items.Kind != yaml.SequenceNode {
		add(items.Line, "items", "must be a list of Pods, got a "+jsonKindOf(items), nil)
		return docs, problems
	}
	for i, item := range items.Content {
		prefix := "items[" + strconv.Itoa(i) + "]"
		if item.Kind != yaml.MappingNode {
			add(item.Line, prefix, "must be a Pod object, got a "+jsonKindOf(item), nil)
			continue
		}
		k := scalarAt(item, "kind")
		objectKind := kind == "List" && (k == KindConfigMap || k == KindSecret)
		if k != "" && k != "Pod" && !objectKind {
			want := `"Pod"`
			if kind == "List" {
				want = `"Pod", "ConfigMap" or "Secret"`
			}
			named := item
			if k == KindConfigMap || k == KindSecret {
				named = nil // not a pod: /pods must not list it as one
			}
			add(lineOf(item, "kind"), prefix+".kind", fmt.Sprintf("must be %s, got %q", want, k), named)
			continue
		}
		if v := scalarAt(item, "apiVersion"); v != "" && v != "v1" {
			add(lineOf(item, "apiVersion"), prefix+".apiVersion", fmt.Sprintf("must be \"v1\", got %q", v), item)
			continue
		}
		if objectKind {
			obj, errs := decodeObject(item, k)
			for _, p := range errs {
				problems = append(problems, objectDecodeProblem(origin, p, prefix+".", k, item))
			}
			if obj != nil {
				docs = append(docs, decoded{obj: obj, node: item, prefix: prefix + "."})
			}
			continue
		}
		pod, errs := decodePod(item, mightBeSecret(item))
		for _, p := range errs {
			field := prefix
			if p.Field != "" {
				field += "." + p.Field
			}
			add(p.Line, field, p.Message, item)
		}
		if pod != nil {
			docs = append(docs, decoded{pod: pod, node: item, prefix: prefix + "."})
		}
	}
	return docs, problems
}

// objectDecodeProblem is a DecodeError of a ConfigMap or Secret: it never
// carries a pod name, and its message names the object.
func objectDecodeProblem(origin Origin, p Problem, prefix, kind string, node *yaml.Node) Problem {
	name, _ := metaOf(node)
	field := p.Field
	if field != "" {
		field = prefix + field
	}
	return Problem{Source: origin.Source, Origin: origin.Path, Line: p.Line, Field: field,
		Reason: ReasonDecodeError, Message: kind + " " + strconv.Quote(name) + ": " + p.Message}
}

// decodeProblem is a DecodeError, named after the pod's metadata when its
// node has any.
func decodeProblem(origin Origin, line int, fieldPath, msg string, node *yaml.Node) Problem {
	name, ns := metaOf(node)
	return Problem{Source: origin.Source, Origin: origin.Path, Line: line, Field: fieldPath,
		Reason: ReasonDecodeError, Message: msg, Name: name, Namespace: ns}
}

// decodePod turns one pod's YAML node into a v1.Pod, strictly. It returns
// nil and the reasons when the pod cannot be used. secret says the node
// may really be a Secret (see mightBeSecret), whose values the problems
// must not quote.
func decodePod(node *yaml.Node, secret bool) (*v1.Pod, []Problem) {
	if errs := checkQuantities(node); len(errs) > 0 {
		return nil, errs
	}
	pod := &v1.Pod{}
	if errs := decodeStrict(node, pod, secret); len(errs) > 0 {
		return nil, errs
	}
	return pod, nil
}

// decodeStrict decodes node into the API object into: unknown or
// duplicate fields and wrong types are Problems with their lines. With
// secret (the node is or may be a Secret) no problem quotes the node's
// text: the decoders' own messages are withheld (see withholdYAML).
func decodeStrict(node *yaml.Node, into any, secret bool) []Problem {
	var tree any
	if err := node.Decode(&tree); err != nil {
		line, msg := yamlErrorLine(err)
		if line == 0 {
			line = node.Line // go-yaml's decoder names no line for some problems
		}
		if secret {
			msg = withholdYAML(msg)
		}
		return []Problem{{Line: line, Message: msg}}
	}
	js, err := json.Marshal(tree)
	if err != nil {
		msg := "cannot convert to JSON: " + err.Error()
		if secret {
			msg = withheld("cannot convert to JSON")
		}
		return []Problem{{Line: node.Line, Message: msg}}
	}
	strict, err := sigsjson.UnmarshalStrict(js, into)
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return []Problem{typeProblem(node, te)}
		}
		msg := err.Error()
		if secret {
			msg = withheld("cannot decode")
		}
		return []Problem{{Line: node.Line, Message: msg}}
	}
	var out []Problem
	for _, e := range strict {
		fe, ok := e.(interface{ FieldPath() string })
		if !ok {
			msg := e.Error()
			if secret {
				msg = withheld("cannot decode")
			}
			out = append(out, Problem{Line: node.Line, Message: msg})
			continue
		}
		msg := "unknown field"
		if strings.Contains(e.Error(), "duplicate field") {
			msg = "duplicate field"
		}
		out = append(out, Problem{Line: lineOf(node, fe.FieldPath()), Field: fe.FieldPath(), Message: msg})
	}
	return out
}

// typeProblem explains a JSON type error, finding the offending field's
// line. It names the kinds of value, never the value.
func typeProblem(node *yaml.Node, te *json.UnmarshalTypeError) Problem {
	want := jsonTypeName(te.Type)
	// The path names inlined structs by their Go type (ProbeHandler,
	// VolumeSource); the API's JSON names all start in lower case.
	var keys []string
	for _, k := range strings.Split(te.Field, ".") {
		if k != "" && !unicode.IsUpper(rune(k[0])) {
			keys = append(keys, k)
		}
	}
	dotted := strings.Join(keys, ".")
	path, line, ok := findByKind(node, dotted, te.Value)
	if !ok {
		path, line = dotted, lineOf(node, dotted)
	}
	return Problem{Line: line, Field: path, Message: fmt.Sprintf("wrong type: got %s, want %s", jsonValueName(te.Value), want)}
}

// jsonTypeName says in a manifest author's words what Go type a field has.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonTypeName(t.Elem())
	}
	return t.String()
}

// jsonValueName says what kind of value JSON decoding met. A number that
// does not fit its field comes as "number 1e30": the number is left out,
// as no problem of a Secret may quote its text.
func jsonValueName(v string) string {
	if strings.HasPrefix(v, "number ") {
		return "a number"
	}
	switch v {
	case "object":
		return "an object"
	case "array":
		return "a list"
	case "bool":
		return "a boolean"
	case "number":
		return "a number"
	case "string":
		return "a string"
	}
	return v
}

// quantityPaths are the resource.Quantity fields of a Pod, as dotted paths
// with lists traversed and maps of quantities ending in "*". JSON decoding
// reports a bad quantity without its field, so they are checked on the
// YAML first.
var quantityPaths = []string{
	"spec.containers.resources.limits.*",
	"spec.containers.resources.requests.*",
	"spec.initContainers.resources.limits.*",
	"spec.initContainers.resources.requests.*",
	"spec.ephemeralContainers.resources.limits.*",
	"spec.ephemeralContainers.resources.requests.*",
	"spec.resources.limits.*",
	"spec.resources.requests.*",
	"spec.overhead.*",
	"spec.volumes.emptyDir.sizeLimit",
	"spec.containers.env.valueFrom.resourceFieldRef.divisor",
	"spec.initContainers.env.valueFrom.resourceFieldRef.divisor",
	"spec.volumes.downwardAPI.items.resourceFieldRef.divisor",
}

// checkQuantities reports every quantity in node that does not parse.
func checkQuantities(node *yaml.Node) []Problem {
	var out []Problem
	for _, p := range quantityPaths {
		walkQuantities(node, strings.Split(p, "."), "", func(path string, n *yaml.Node) {
			if n.Kind != yaml.ScalarNode {
				out = append(out, Problem{Line: n.Line, Field: path, Message: "must be a quantity such as 100m, 0.5 or 128Mi, got a " + jsonKindOf(n)})
				return
			}
			if n.ShortTag() == "!!null" {
				return
			}
			if _, err := resource.ParseQuantity(n.Value); err != nil {
				out = append(out, Problem{Line: n.Line, Field: path,
					Message: fmt.Sprintf("invalid quantity %q: must be a number with an optional suffix such as 100m, 0.5 or 128Mi", n.Value)})
			}
		})
	}
	return out
}

func walkQuantities(node *yaml.Node, keys []string, prefix string, visit func(string, *yaml.Node)) {
	for node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	if len(keys) == 0 {
		visit(prefix, node)
		return
	}
	switch node.Kind {
	case yaml.SequenceNode:
		for i, item := range node.Content {
			walkQuantities(item, keys, prefix+"["+strconv.Itoa(i)+"]", visit)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			k := node.Content[i].Value
			if keys[0] != "*" && k != keys[0] {
				continue
			}
			p := k
			if keys[0] == "*" {
				p = "[" + k + "]"
			} else if prefix != "" {
				p = "." + k
			}
			walkQuantities(node.Content[i+1], keys[1:], prefix+p, visit)
		}
	}
}

// scalarAt returns the scalar value under key in a mapping, or "". An
// alias counts as the scalar it refers to, as it does once decoded.
func scalarAt(node *yaml.Node, key string) string {
	_, n := child(node, pathSegment{key: key})
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// metaOf reads metadata.name and metadata.namespace from a pod's node even
// when the pod does not decode, so its rejection can be shown under its name.
func metaOf(node *yaml.Node) (name, namespace string) {
	if node == nil {
		return "", ""
	}
	_, meta := child(node, pathSegment{key: "metadata"})
	if meta == nil {
		return "", ""
	}
	return scalarAt(meta, "name"), scalarAt(meta, "namespace")
}

var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?(?:line (\d+): )?`)

// yamlErrorLine pulls the line out of a go-yaml error ("yaml: line 7: did
// not find expected key") and returns the message without the prefix.
func yamlErrorLine(err error) (int, string) {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		err = errors.New(te.Errors[0])
	}
	msg := err.Error()
	m := yamlLineRE.FindStringSubmatch(msg)
	line, _ := strconv.Atoi(m[1])
	rest := msg[len(m[0]):]
	if l2, r2, ok := strings.Cut(rest, ": "); ok && strings.HasPrefix(l2, "line ") {
		if n, err := strconv.Atoi(strings.TrimPrefix(l2, "line ")); err == nil {
			line, rest = n, r2
		}
	}
	return line, "invalid YAML: " + rest
}

var unknownAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// aliasLine is the line of the first alias of the anchor name in data, 0
// if there is none: go-yaml reports an unknown anchor without a line, and
// a problem that withholds the name must at least say where it is. An
// alias token starts a line or follows a blank or a flow indicator, and
// ends at one or at a line break.
func aliasLine(data []byte, name string) int {
	const bounds = " \t\r\n,[]{}"
	tok := []byte("*" + name)
	for off := 0; ; {
		i := bytes.Index(data[off:], tok)
		if i < 0 {
			return 0
		}
		start, end := off+i, off+i+len(tok)
		before := start == 0 || strings.IndexByte(bounds, data[start-1]) >= 0
		after := end == len(data) || strings.IndexByte(bounds, data[end]) >= 0
		if before && after {
			return bytes.Count(data[:start], []byte("\n")) + 1
		}
		off = start + 1
	}
}
