package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const (
	readmePath        = "../../README.md"
	configurationPage = "../../docs/configuration.md"
	kubeletUsersPage  = "../../docs/kubelet-users.md"
	referenceBegin    = "<!-- BEGIN GENERATED: berth run settings. Edit cmd/berth/settings.go, then: UPDATE_GOLDEN=1 go test ./cmd/berth -run TestConfigReference -->"
	referenceEnd      = "<!-- END GENERATED -->"
)

// TestConfigReference keeps docs/configuration.md's table of settings equal
// to what bindFlags registers: a flag added, renamed, re-documented or given
// another default fails this test until the page is regenerated.
func TestConfigReference(t *testing.T) {
	checkGenerated(t, configurationPage, referenceBegin, referenceEnd, configReference(t), "TestConfigReference")
}

// checkGenerated compares the section of page between begin and end with
// generated, and rewrites it under UPDATE_GOLDEN=1.
func checkGenerated(t *testing.T, page, begin, end, generated, test string) {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	b := strings.Index(text, begin)
	e := strings.Index(text, end)
	if b < 0 || e < b {
		t.Fatalf("%s lacks the markers %q ... %q", page, begin, end)
	}
	current := text[b+len(begin) : e]
	if current == generated {
		return
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		text = text[:b+len(begin)] + generated + text[e:]
		if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date; regenerate it with\n  UPDATE_GOLDEN=1 go test ./cmd/berth -run %s\n--- generated\n%s\n--- page\n%s", page, test, generated, current)
}

// configReference renders every `berth run` flag with its config-file field,
// its default and its help, as a Markdown table.
func configReference(t *testing.T) string {
	t.Helper()
	var configPath string
	s := defaultSettings()
	fs := flag.NewFlagSet("berth run", flag.ContinueOnError)
	bindFlags(fs, &s, &configPath)
	defaults := settingsJSON(t, defaultSettings())

	var b strings.Builder
	b.WriteString("\n| flag | config file field | default | what it sets |\n| --- | --- | --- | --- |\n")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
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
	base := settingsJSON(t, defaultSettings())
	for _, value := range []string{"7m7s", "7", "X-Probe:v", "192.0.2.7", "probe"} {
		var configPath string
		s := defaultSettings()
		fs := flag.NewFlagSet("probe", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		bindFlags(fs, &s, &configPath)
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

func settingsJSON(t *testing.T, s settings) map[string]any {
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

// TestReadmeCommands checks that the README shows the two commands a
// newcomer runs, that they exist as make targets, that CI runs the test
// command exactly as written, and that every berth command the README's
// and the docs' shell examples run exists.
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs pages: %v", err)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"demo", "test", "deb"} {
		if !strings.Contains(string(readme), "make "+target) {
			t.Errorf("README.md does not show `make %s`", target)
		}
		if !regexp.MustCompile(`(?m)^` + target + `:`).Match(makefile) {
			t.Errorf("Makefile has no %s target", target)
		}
	}
	if !regexp.MustCompile(`(?m)^make test$`).Match(ci) {
		t.Errorf(".ci/run does not run `make test`, the README's test command")
	}
	for _, page := range append([]string{readmePath}, pages...) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		checkBerthCommands(t, page, string(text))
	}
}

// checkBerthCommands fails for a `berth COMMAND` in a shell block of text
// that berth does not have.
func checkBerthCommands(t *testing.T, page, text string) {
	t.Helper()
	inCode := false
	command := regexp.MustCompile(`^\s*(?:sudo\s+)?(?:\S*/)?berth\s+([a-z]+)`)
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		m := command.FindStringSubmatch(line)
		if !inCode || m == nil {
			continue
		}
		name := m[1]
		if alias, ok := aliases[name]; ok {
			name = alias
		}
		if _, ok := commands[name]; !ok {
			t.Errorf("%s runs `berth %s`, which is no berth command: %s", page, m[1], strings.TrimSpace(line))
		}
	}
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
	s := defaultSettings()
	fs := flag.NewFlagSet("berth run", flag.ContinueOnError)
	bindFlags(fs, &s, &configPath)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(section, "`--"+f.Name+"`") {
			t.Errorf("%s does not say whether --%s carries over from the kubelet", kubeletUsersPage, f.Name)
		}
	})
}
