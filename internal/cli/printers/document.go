package printers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// Printer writes objects in one -o format: json (indented by two spaces,
// as kubectl and berth's API do), yaml, name (KIND/NAME a line) or a
// jsonpath template, which kubectl runs over the object as JSON sees it.
// The table formats ("" and wide) are PodTable's and EventTable's.
type Printer struct {
	format string
	jp     *jsonpath.JSONPath // for jsonpath= and jsonpath-file=
}

// New parses the -o value of a document format. A template that does not
// parse is a usage error: its message says why.
func New(value string) (*Printer, error) {
	p := &Printer{format: value}
	kind, arg, _ := strings.Cut(value, "=")
	switch kind {
	case "jsonpath-file":
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, fmt.Errorf("-o jsonpath-file: %w", err)
		}
		arg = string(b)
		fallthrough
	case "jsonpath":
		if arg == "" {
			return nil, fmt.Errorf("-o %s: want a template, as in -o 'jsonpath={.items[*].metadata.name}'", kind)
		}
		p.format = "jsonpath"
		// kubectl's default: a key an object lacks prints nothing rather
		// than failing the whole list.
		p.jp = jsonpath.New("output").AllowMissingKeys(true)
		if err := p.jp.Parse(relaxedJSONPath(arg)); err != nil {
			return nil, fmt.Errorf("-o %s: parsing the template %q: %w", kind, arg, err)
		}
	}
	return p, nil
}

// relaxedJSONPath accepts a template given without braces or leading dot
// (.items[0].metadata.name, items[0]), as kubectl does.
func relaxedJSONPath(t string) string {
	if strings.Contains(t, "{") {
		return t
	}
	t = strings.TrimSpace(t)
	if !strings.HasPrefix(t, ".") {
		t = "." + t
	}
	return "{" + t + "}"
}

// Print writes obj; names are its objects' KIND/NAME for -o name.
func (p *Printer) Print(w io.Writer, obj any, names []string) error {
	switch p.format {
	case "json":
		// Names such as <stdin> and messages quoting a field stay as
		// written: no \u003c escapes, which only HTML needs.
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(obj); err != nil {
			return fmt.Errorf("render JSON: %w", err)
		}
		return nil
	case "yaml":
		b, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("render YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	case "name":
		for _, n := range names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return err
			}
		}
		return nil
	case "jsonpath":
		// The template runs over the object as JSON decodes it, so
		// field names are the JSON ones (metadata.name, not ObjectMeta).
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("render JSON: %w", err)
		}
		var data any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&data); err != nil {
			return fmt.Errorf("render JSON: %w", err)
		}
		var out bytes.Buffer
		if err := p.jp.Execute(&out, data); err != nil {
			return fmt.Errorf("-o jsonpath: %w", err)
		}
		_, err = w.Write(out.Bytes())
		return err
	}
	return fmt.Errorf("-o %q: not a document format", p.format)
}

// PrintWatched prints one object of a watch; YAML documents are separated
// as a stream.
func (p *Printer) PrintWatched(w io.Writer, obj any, name string) error {
	if err := p.Print(w, obj, []string{name}); err != nil {
		return err
	}
	if p.format == "yaml" {
		_, err := fmt.Fprintln(w, "---")
		return err
	}
	return nil
}
