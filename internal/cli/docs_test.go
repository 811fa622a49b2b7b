package cli

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const readmePath = "../../README.md"

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
	for _, target := range []string{"demo", "test", "release"} {
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
	root := NewRoot("dev", io.Discard, io.Discard)
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
		if cmd, _, err := root.Find([]string{m[1]}); err != nil || cmd == root {
			t.Errorf("%s runs `berth %s`, which is no berth command: %s", page, m[1], strings.TrimSpace(line))
		}
	}
}
