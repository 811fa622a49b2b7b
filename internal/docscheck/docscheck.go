// Package docscheck reads the project's Markdown documentation the way its
// tests need: the links and anchors of a page (GitHub's rules), and the
// shell blocks a page marks as tested, so that a test runs the commands
// from the page itself rather than from a copy.
package docscheck

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode"
)

// Link is a link of a page, with the line it is on.
type Link struct {
	Line   int
	Target string
}

// Block is a fenced code block a page marks for a test with
// `<!-- test: TAG -->` on the line before its opening fence.
type Block struct {
	Line int // the line of the opening fence
	Lang string
	Text string
}

var (
	fenceRE  = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")
	markerRE = regexp.MustCompile(`^<!-- test: ([a-z0-9-]+) -->$`)
	headRE   = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkRE   = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refRE    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	codeRE   = regexp.MustCompile("`[^`]*`")
	htmlIDRE = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// lines walks a page's lines outside fenced code blocks.
func lines(text string, f func(n int, line string)) {
	var fence string
	for i, line := range strings.Split(text, "\n") {
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			t := strings.TrimSpace(line)
			switch {
			case fence == "":
				fence = m[1]
				continue
			case len(t) >= len(fence) && t == strings.Repeat(fence[:1], len(t)):
				fence = ""
				continue
			}
		}
		if fence == "" {
			f(i+1, line)
		}
	}
}

// Links returns the links of a page outside code: inline links and
// reference definitions.
func Links(text string) []Link {
	var out []Link
	lines(text, func(n int, line string) {
		line = codeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Line: n, Target: m[1]})
		}
		if m := refRE.FindStringSubmatch(line); m != nil {
			out = append(out, Link{Line: n, Target: m[1]})
		}
	})
	return out
}

// Anchors returns the anchors a page has on GitHub: one per heading,
// slugged as GitHub does (lower case; letters, digits, spaces, hyphens and
// underscores kept, other characters dropped; spaces become hyphens; a
// repeated slug gets -1, -2, ...), plus explicit <a id> and <a name>.
func Anchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	lines(text, func(_ int, line string) {
		for _, m := range htmlIDRE.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := headRE.FindStringSubmatch(line)
		if m == nil {
			return
		}
		slug := Slug(m[2])
		if k := seen[slug]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	})
	return anchors
}

// Slug is GitHub's anchor for a heading's text.
func Slug(heading string) string {
	// Links in a heading count by their text.
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// Blocks returns the blocks of a page marked `<!-- test: tag -->`, in
// order.
func Blocks(text, tag string) []Block {
	var out []Block
	all := strings.Split(text, "\n")
	for i := 0; i < len(all); i++ {
		m := markerRE.FindStringSubmatch(strings.TrimSpace(all[i]))
		if m == nil || m[1] != tag || i+1 >= len(all) {
			continue
		}
		open := fenceRE.FindStringSubmatch(all[i+1])
		if open == nil {
			continue
		}
		var body []string
		j := i + 2
		for ; j < len(all) && strings.TrimSpace(all[j]) != open[1]; j++ {
			body = append(body, all[j])
		}
		out = append(out, Block{Line: i + 2, Lang: open[2], Text: strings.Join(body, "\n") + "\n"})
		i = j
	}
	return out
}

// Markers returns every test tag a page marks, with the line of each
// marker, to check that each marker precedes a block.
func Markers(text string) map[int]string {
	out := map[int]string{}
	for i, line := range strings.Split(text, "\n") {
		if m := markerRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			out[i+1] = m[1]
		}
	}
	return out
}

// PageBlocks reads a page and returns its blocks marked tag, failing when
// there are none: a test that runs a page's commands must not pass by
// running nothing.
func PageBlocks(path, tag string) ([]Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read page: %w", err)
	}
	blocks := Blocks(string(data), tag)
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%s: no block marked <!-- test: %s -->", path, tag)
	}
	return blocks, nil
}
