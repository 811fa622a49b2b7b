package podspec

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-agent/berth/internal/podrules"
)

// Kinds of the objects a manifest may hold beside its pods. The kubelet
// refuses static pods every reference to them (k/k#60913); berth resolves
// the references against the ConfigMaps and Secrets of the same source and
// namespace, so a pod reads them exactly as it would in a cluster.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

// maxObjectSize is the API server's limit on the data of one ConfigMap or
// Secret (corev1.MaxSecretSize, also applied to ConfigMaps).
const maxObjectSize = 1 << 20

// maxObjectKeys is berth's limit on the keys of one ConfigMap or Secret.
// The API server has none: the size limit counts values only, so a
// manifest within --max-bytes could hold a million empty keys. Each key is
// a file berth writes and syncs into every volume of the object, or a
// variable it sets, before a pod using it starts: 20,000 keys cost about
// 10 s of fsyncs in one pod's start, 1,000 about half a second. Real
// ConfigMaps hold a few to a few hundred keys (a key per setting or per
// file of a directory); one with more is a mistake or an attack.
const maxObjectKeys = 1000

// Object is a ConfigMap or a Secret read from a manifest, defaulted and
// validated. Exactly one of ConfigMap and Secret is set. A Secret's
// stringData is already merged into its data, as the API server stores it.
type Object struct {
	// Line is where the object starts in its manifest.
	Line      int           `json:"line"`
	ConfigMap *v1.ConfigMap `json:"configMap,omitempty"`
	Secret    *v1.Secret    `json:"secret,omitempty"`
}

// Kind is KindConfigMap or KindSecret.
func (o Object) Kind() string {
	if o.Secret != nil {
		return KindSecret
	}
	return KindConfigMap
}

// Meta is the object's metadata.
func (o Object) Meta() *metav1.ObjectMeta {
	if o.Secret != nil {
		return &o.Secret.ObjectMeta
	}
	return &o.ConfigMap.ObjectMeta
}

// Key identifies an object within a source: kind, namespace and name.
func (o Object) Key() ObjectKey {
	m := o.Meta()
	return ObjectKey{Kind: o.Kind(), Namespace: m.Namespace, Name: m.Name}
}

// ObjectKey identifies an object within a source.
type ObjectKey struct{ Kind, Namespace, Name string }

func (k ObjectKey) String() string {
	return fmt.Sprintf("%s %q in namespace %q", k.Kind, k.Name, k.Namespace)
}

// decodeObject turns a ConfigMap or Secret document into an Object,
// strictly, as decodePod does for pods. A Secret's data values must be
// base64; a bad one is found on the YAML first, since JSON decoding does not
// say which key it was.
func decodeObject(node *yaml.Node, kind string) (*Object, []Problem) {
	o := &Object{Line: node.Line}
	var into any
	if kind == KindSecret {
		if errs := checkBase64(node); len(errs) > 0 {
			return nil, errs
		}
		o.Secret = &v1.Secret{}
		into = o.Secret
	} else {
		o.ConfigMap = &v1.ConfigMap{}
		into = o.ConfigMap
	}
	if errs := decodeStrict(node, into, kind == KindSecret); len(errs) > 0 {
		return nil, errs
	}
	return o, nil
}

// checkBase64 reports every value of a Secret's data that is not base64,
// an alias by the value it refers to. The problem says neither the value
// nor where in it decoding stopped: the offset of the first byte that is
// no base64 tells how a plain-text password begins.
func checkBase64(node *yaml.Node) []Problem {
	var out []Problem
	_, data := child(node, pathSegment{key: "data"})
	for data != nil && data.Kind == yaml.AliasNode {
		data = data.Alias
	}
	if data == nil || data.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(data.Content); i += 2 {
		k, v := data.Content[i], data.Content[i+1]
		line := v.Line
		for v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
			continue
		}
		if _, err := base64.StdEncoding.DecodeString(v.Value); err != nil {
			out = append(out, Problem{Line: line, Field: "data[" + k.Value + "]",
				Message: "must be base64 (put plain text under stringData instead; the value is withheld)"})
		}
	}
	return out
}

// defaultObject fills what the API server would: the namespace, and for a
// Secret the type Opaque and stringData merged over data.
func defaultObject(o *Object) {
	m := o.Meta()
	if m.Namespace == "" {
		m.Namespace = metav1.NamespaceDefault
	}
	s := o.Secret
	if s == nil {
		return
	}
	if s.Type == "" {
		s.Type = v1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
}

// validateObject checks a defaulted ConfigMap or Secret as the API server
// does (ValidateConfigMap, ValidateSecret): names, keys, the 1 MiB limit,
// and the keys each Secret type requires.
func validateObject(o *Object) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(o.Meta(), true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if cm := o.ConfigMap; cm != nil {
		size := 0
		for k, v := range cm.Data {
			errs = append(errs, podrules.ValidateObjectKey(k, field.NewPath("data").Key(k))...)
			size += len(v)
		}
		for k, v := range cm.BinaryData {
			p := field.NewPath("binaryData").Key(k)
			errs = append(errs, podrules.ValidateObjectKey(k, p)...)
			if _, dup := cm.Data[k]; dup {
				errs = append(errs, field.Invalid(p, k, "duplicate of key present in data"))
			}
			size += len(v)
		}
		if size > maxObjectSize {
			errs = append(errs, field.TooLong(field.NewPath("data"), "", maxObjectSize))
		}
		return errs
	}
	s := o.Secret
	size := 0
	for k, v := range s.Data {
		errs = append(errs, podrules.ValidateObjectKey(k, field.NewPath("data").Key(k))...)
		size += len(v)
	}
	if size > maxObjectSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", maxObjectSize))
	}
	data := field.NewPath("data")
	require := func(keys ...string) {
		for _, k := range keys {
			if _, ok := s.Data[k]; !ok {
				errs = append(errs, field.Required(data.Key(k), "a Secret of type "+string(s.Type)+" needs it"))
			}
		}
	}
	switch s.Type {
	case v1.SecretTypeDockercfg:
		require(v1.DockerConfigKey)
		errs = append(errs, validateJSONObject(s.Data[v1.DockerConfigKey], data.Key(v1.DockerConfigKey))...)
	case v1.SecretTypeDockerConfigJson:
		require(v1.DockerConfigJsonKey)
		errs = append(errs, validateJSONObject(s.Data[v1.DockerConfigJsonKey], data.Key(v1.DockerConfigJsonKey))...)
	case v1.SecretTypeBasicAuth:
		_, user := s.Data[v1.BasicAuthUsernameKey]
		_, pass := s.Data[v1.BasicAuthPasswordKey]
		if !user && !pass {
			errs = append(errs, field.Required(data.Key(v1.BasicAuthUsernameKey), "a basic-auth Secret needs a username or a password"))
		}
	case v1.SecretTypeSSHAuth:
		require(v1.SSHAuthPrivateKey)
	case v1.SecretTypeTLS:
		require(v1.TLSCertKey, v1.TLSPrivateKeyKey)
	}
	return errs
}

// validateObjectKeyCount checks the number of keys of an object against
// maxObjectKeys, before defaultObject: a Secret's keys are those of data
// and stringData together, and the problem names whichever of the two
// holds more of them, so its line points at the bulk of the keys.
func validateObjectKeyCount(o *Object) field.ErrorList {
	var n int
	var path *field.Path
	if cm := o.ConfigMap; cm != nil {
		n, path = len(cm.Data)+len(cm.BinaryData), field.NewPath("data")
		if len(cm.BinaryData) > len(cm.Data) {
			path = field.NewPath("binaryData")
		}
	} else {
		s := o.Secret
		n, path = len(s.Data), field.NewPath("data")
		for k := range s.StringData {
			if _, dup := s.Data[k]; !dup {
				n++
			}
		}
		if len(s.StringData) > len(s.Data) {
			path = field.NewPath("stringData")
		}
	}
	if n <= maxObjectKeys {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"%d keys, more than the %d a ConfigMap or Secret may hold on berth: each key is a file to write or a variable to set when a pod using it starts",
		n, maxObjectKeys))}
}

// unsupportedObject rejects what a valid object may be but a standalone
// node cannot honour: a service-account token Secret is filled in by the
// token controller of an API server.
func unsupportedObject(o *Object) field.ErrorList {
	if o.Secret != nil && o.Secret.Type == v1.SecretTypeServiceAccountToken {
		return field.ErrorList{field.Forbidden(field.NewPath("type"),
			"service-account tokens are issued by an API server, which a standalone node has none of; use an Opaque Secret")}
	}
	return nil
}

// validateJSONObject checks that a docker config is a JSON object, as the
// API server does; what it holds is read when a pull uses it.
func validateJSONObject(b []byte, p *field.Path) field.ErrorList {
	if b == nil {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return field.ErrorList{field.Invalid(p, "<secret contents redacted>", "must be a JSON object: "+redactJSONError(err))}
	}
	return nil
}

// redactJSONError keeps the kind of a JSON error without the bytes it
// quotes, which are a Secret's.
func redactJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return "syntax error at byte " + strconv.FormatInt(se.Offset, 10)
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s must be %s", te.Field, jsonTypeName(te.Type))
	}
	return "not an object"
}

// EnvKeys are the keys of an object that envFrom turns into variables,
// sorted: a ConfigMap's data (never its binaryData), a Secret's data.
func (o Object) EnvKeys() []string {
	if o.ConfigMap != nil {
		return sets.List(sets.KeySet(o.ConfigMap.Data))
	}
	return sets.List(sets.KeySet(o.Secret.Data))
}

// Value is the bytes of one key of an object as a volume sees it, and
// whether it has it.
func (o Object) Value(k string) ([]byte, bool) {
	if o.ConfigMap != nil {
		if v, ok := o.ConfigMap.BinaryData[k]; ok {
			return v, true
		}
	}
	return o.EnvValue(k)
}

// EnvValue is the value of one key as environment takes it: a
// ConfigMap's binaryData is not environment.
func (o Object) EnvValue(k string) ([]byte, bool) {
	if o.ConfigMap != nil {
		v, ok := o.ConfigMap.Data[k]
		return []byte(v), ok
	}
	v, ok := o.Secret.Data[k]
	return v, ok
}

// objectProblems turns an object's validation errors into Problems. They
// never carry a pod name: the object is not a pod, and /pods must not list
// it as a rejected one.
func objectProblems(errs field.ErrorList, reason string, d decoded, origin Origin) []Problem {
	out := fieldProblems(errs, reason, d, origin)
	for i := range out {
		out[i].Message = d.obj.Kind() + " " + strconv.Quote(d.obj.Meta().Name) + ": " + out[i].Message
	}
	return out
}

// Identity is the object's kind, name and namespace.
func (o Object) Identity() (kind, name, namespace string) {
	k := o.Key()
	return k.Kind, k.Name, k.Namespace
}

// CheckObject validates an object restored from persisted state as a
// manifest's would be: valid, and of a type berth supports.
func CheckObject(o *Object) field.ErrorList {
	return append(validateObject(o), unsupportedObject(o)...)
}
