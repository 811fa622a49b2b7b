package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/berth-agent/berth/internal/docscheck"
)

const (
	configurationPage = "../../docs/configuration.md"
	kubeletUsersPage  = "../../docs/kubelet-users.md"
	referenceBegin    = "<!-- BEGIN GENERATED: berth run settings. Edit internal/config/settings.go, then: UPDATE_GOLDEN=1 go test ./internal/config -run TestConfigReference -->"
	referenceEnd      = "<!-- END GENERATED -->"
)

// TestConfigReference keeps docs/configuration.md's table of settings equal
// to what BindFlags registers: a flag added, renamed, re-documented or given
// another default fails this test until the page is regenerated.
func TestConfigReference(t *testing.T) {
	checkGenerated(t, configurationPage, referenceBegin, referenceEnd, configReference(t), "TestConfigReference")
}

// TestRenamesReference keeps docs/configuration.md's table of renamed
// config file fields equal to renamedKeys.
func TestRenamesReference(t *testing.T) {
	const begin = "<!-- BEGIN GENERATED: renamed fields. Edit renamedKeys in internal/config/file.go, then: UPDATE_GOLDEN=1 go test ./internal/config -run TestRenamesReference -->"
	var b strings.Builder
	b.WriteString("\n| older name | name |\n| --- | --- |\n")
	for _, old := range slices.Sorted(maps.Keys(renamedKeys)) {
		fmt.Fprintf(&b, "| `%s` | `%s` |\n", old, renamedKeys[old])
	}
	checkGenerated(t, configurationPage, begin, "<!-- END GENERATED: renamed fields -->", b.String(), "TestRenamesReference")
}

// checkGenerated fails when page's section between begin and end is not
// generated, and rewrites it under UPDATE_GOLDEN=1.
func checkGenerated(t *testing.T, page, begin, end, generated, test string) {
	t.Helper()
	if err := docscheck.Generated(page, begin, end, generated, os.Getenv("UPDATE_GOLDEN") == "1"); err != nil {
		t.Errorf("%v\nregenerate it with\n  UPDATE_GOLDEN=1 go test ./internal/config -run %s", err, test)
	}
}

// configReference renders every `berth run` flag with its config-file field,
// its default and its help, as a Markdown table.
func configReference(t *testing.T) string {
	t.Helper()
	var configPath string
	s := Defaults()
	fs := pflag.NewFlagSet("berth run", pflag.ContinueOnError)
	BindFlags(fs, &s, &configPath)
	defaults := settingsJSON(t, Defaults())

	var b strings.Builder
	b.WriteString("\n| flag | config file field | default | what it sets |\n| --- | --- | --- | --- |\n")
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	for _, name := range names {
		f := fs.Lookup(name)
		field := configField(t, name)
		def := "none"
		switch {
		case name == "config":
			field = "(the file itself)"
		case field == "":
			t.Fatalf("flag --%s sets no config file field", name)
		default:
			if v, ok := defaults[field]; ok {
				def = "`" + renderDefault(v) + "`"
			}
		}
		if field != "(the file itself)" {
			field = "`" + field + "`"
		}
		usage := regexp.MustCompile(` \(default [^)]*\)$`).ReplaceAllString(f.Usage, "")
		usage = strings.ReplaceAll(usage, "|", `\|`)
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", name, field, def, usage)
	}
	return b.String()
}

// configField finds the config file field a flag writes by setting the
// flag and seeing which field changed.
func configField(t *testing.T, name string) string {
	t.Helper()
	base := settingsJSON(t, Defaults())
	for _, value := range []string{"7m7s", "7", "X-Probe:v", "192.0.2.7", "probe", "probe=v", "false"} {
		var configPath string
		s := Defaults()
		fs := pflag.NewFlagSet("probe", pflag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		BindFlags(fs, &s, &configPath)
		if fs.Set(name, value) != nil {
			continue
		}
		var changed []string
		for k, v := range settingsJSON(t, s) {
			if fmt.Sprint(base[k]) != fmt.Sprint(v) {
				changed = append(changed, k)
			}
		}
		if len(changed) == 1 {
			return changed[0]
		}
	}
	return ""
}

func settingsJSON(t *testing.T, s Settings) map[string]any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func renderDefault(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprint(v)
}

// TestKubeletUsersPage keeps the page for kubelet users complete: every
// flag of `berth run` is listed in its section on what carries over,
// either as one that carries over from the kubelet or as berth's own.
func TestKubeletUsersPage(t *testing.T) {
	page, err := os.ReadFile(kubeletUsersPage)
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	start := strings.Index(text, "## What carries over")
	end := strings.Index(text[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatalf("%s has no section \"## What carries over\"", kubeletUsersPage)
	}
	section := text[start : start+1+end]
	var configPath string
	s := Defaults()
	fs := pflag.NewFlagSet("berth run", pflag.ContinueOnError)
	BindFlags(fs, &s, &configPath)
	fs.VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(section, "`--"+f.Name+"`") {
			t.Errorf("%s does not say whether --%s carries over from the kubelet", kubeletUsersPage, f.Name)
		}
	})
}
