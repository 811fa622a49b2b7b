package podrules

import (
	"sort"
	"strings"
)

// FieldsTable renders the field registry as the Markdown table
// docs/pod-fields.md shows (fields_table_test.go keeps the two equal): one
// row per field, by path, with what berth does and why.
func FieldsTable() string {
	paths := make([]string, 0, len(podFields))
	for p := range podFields {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	b.WriteString("\n| field | berth | why, or how |\n| --- | --- | --- |\n")
	for _, p := range paths {
		e := podFields[p]
		b.WriteString("| `" + p + "` | " + string(e.support) + " | " + e.note + " |\n")
	}
	return b.String()
}
