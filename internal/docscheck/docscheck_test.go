package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the repository, from this package's directory.
const root = "../.."

// pages are the project's documentation: the README, CONTRIBUTING.md and
// every page of docs/.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no page in docs/")
	}
	return append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}, docs...)
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return r
}

// TestLinks checks every relative link of the documentation: its file
// exists in the repository, and its anchor, if any, is a heading (or an
// explicit anchor) of the page it points to.
func TestLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := Anchors(read(t, path))
		anchors[path] = a
		return a
	}
	checked := 0
	for _, page := range pages(t) {
		for _, l := range Links(read(t, page)) {
			target := l.Target
			if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
				continue // http:, https:, mailto:
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if strings.HasPrefix(file, "/") {
					t.Errorf("%s:%d: link %q is absolute; links are relative to the page", rel(page), l.Line, target)
					continue
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: no such file %s", rel(page), l.Line, target, rel(path))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s:%d: link %q: anchor into a file that is not Markdown", rel(page), l.Line, target)
				continue
			}
			if !anchorsOf(path)[anchor] {
				var have []string
				for a := range anchorsOf(path) {
					have = append(have, a)
				}
				sort.Strings(have)
				t.Errorf("%s:%d: link %q: %s has no anchor %q (it has %s)", rel(page), l.Line, target, rel(path), anchor, strings.Join(have, ", "))
			}
		}
	}
	if checked == 0 {
		t.Error("no relative link checked")
	}
}

// TestReadmeSize keeps the README a front page: at most 200 lines and
// 2,500 words; the rest belongs in docs/.
func TestReadmeSize(t *testing.T) {
	text := read(t, filepath.Join(root, "README.md"))
	if n := strings.Count(text, "\n"); n > 200 {
		t.Errorf("README.md has %d lines, at most 200", n)
	}
	if n := len(strings.Fields(text)); n > 2500 {
		t.Errorf("README.md has %d words, at most 2,500", n)
	}
}

// TestNoHistory keeps the documentation about the product as it is: no
// commit hashes, issue numbers, dates or remarks on machine load (history
// is in git).
func TestNoHistory(t *testing.T) {
	rules := []struct {
		re   *regexp.Regexp
		what string
	}{
		{regexp.MustCompile(`(?i)\bcommits?\s+` + "`?" + `[0-9a-f]{7,40}\b`), "a commit hash"},
		{regexp.MustCompile(`(?i)\b(issue|PR|pull request)s?\s+#?[0-9]+`), "an issue number"},
		{regexp.MustCompile(`(?:^|[\s(])(?:[A-Za-z0-9/_.-]+)?#[0-9]{2,}\b`), "an issue reference"},
		{regexp.MustCompile(`\b(19|20)[0-9]{2}-[01][0-9]-[0-3][0-9]\b`), "a date"},
		{regexp.MustCompile(`(?i)\bload average|\bat load [0-9]|\bbusy machine|\bquiet machine|\bshared machine`), "a remark on machine load"},
	}
	for _, page := range pages(t) {
		lines(read(t, page), func(n int, line string) {
			if strings.Contains(line, "<!-- BEGIN GENERATED") || strings.Contains(line, "<!-- END GENERATED") {
				return
			}
			for _, r := range rules {
				if m := r.re.FindString(line); m != "" {
					t.Errorf("%s:%d: %s (%q): describe the product as it is; history is in git", rel(page), n, r.what, strings.TrimSpace(m))
				}
			}
		})
	}
}

// TestMarkedBlocks checks that every test marker of the documentation
// precedes a fenced shell block, so that no marked command is silently
// skipped, and that the pages whose commands tests run have them.
func TestMarkedBlocks(t *testing.T) {
	for _, page := range pages(t) {
		text := read(t, page)
		blocks := map[int]bool{}
		for _, tag := range Markers(text) {
			for _, b := range Blocks(text, tag) {
				if b.Lang != "sh" {
					t.Errorf("%s:%d: a block marked for a test is %q, not sh", rel(page), b.Line, b.Lang)
				}
				blocks[b.Line-1] = true
			}
		}
		for line, tag := range Markers(text) {
			if !blocks[line] {
				t.Errorf("%s:%d: the marker <!-- test: %s --> is not right above a fenced block", rel(page), line, tag)
			}
		}
	}
	for page, tag := range map[string]string{"docs/install.md": "install", "docs/getting-started.md": "getting-started"} {
		if _, err := PageBlocks(filepath.Join(root, page), tag); err != nil {
			t.Error(err)
		}
	}
}

func TestSlug(t *testing.T) {
	for _, tt := range []struct{ heading, want string }{
		{"Install in five minutes", "install-in-five-minutes"},
		{"2. A CNI network", "2-a-cni-network"},
		{"`berth daemon not reachable at /run/berth/berth.sock`", "berth-daemon-not-reachable-at-runberthberthsock"},
		{"A fleet of 2,000 devices", "a-fleet-of-2000-devices"},
		{"`FailedKillPod`: a stopped sandbox", "failedkillpod-a-stopped-sandbox"},
		{"For kubelet_users [here](x.md)", "for-kubelet_users-here"},
	} {
		if got := Slug(tt.heading); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

func TestAnchorsAndLinks(t *testing.T) {
	page := "# Title\n\nSee [a](other.md#x) and [b](#title-1).\n\n```sh\n# not a heading [c](code.md)\n```\n\n## Title\n\n<a id=\"custom\"></a>\n\n[ref]: ../x.md\n"
	a := Anchors(page)
	for _, want := range []string{"title", "title-1", "custom"} {
		if !a[want] {
			t.Errorf("anchor %q missing from %v", want, a)
		}
	}
	if a["not-a-heading-ccodemd"] {
		t.Errorf("a comment in a code block counted as a heading")
	}
	var targets []string
	for _, l := range Links(page) {
		targets = append(targets, l.Target)
	}
	if got := strings.Join(targets, " "); got != "other.md#x #title-1 ../x.md" {
		t.Errorf("links %q", got)
	}
}

func TestBlocks(t *testing.T) {
	page := "intro\n<!-- test: install -->\n```sh\napt-get install x\necho 'a ``` b'\n```\n\n```sh\nnot marked\n```\n<!-- test: other -->\n```sh\nother\n```\n"
	b := Blocks(page, "install")
	if len(b) != 1 || b[0].Text != "apt-get install x\necho 'a ``` b'\n" || b[0].Line != 3 || b[0].Lang != "sh" {
		t.Errorf("blocks %+v", b)
	}
	if m := Markers(page); len(m) != 2 || m[2] != "install" || m[11] != "other" {
		t.Errorf("markers %v", m)
	}
}

// TestReadmeInstallIsThePage keeps the README's five-minute install a
// summary of docs/install.md, whose commands the systemd test bed runs:
// every command line of the README's install section is one of the page's
// tested lines.
func TestReadmeInstallIsThePage(t *testing.T) {
	readme := read(t, filepath.Join(root, "README.md"))
	start := strings.Index(readme, "## Install in five minutes")
	if start < 0 {
		t.Fatal("README.md has no section \"## Install in five minutes\"")
	}
	section := readme[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	blocks, err := PageBlocks(filepath.Join(root, "docs", "install.md"), "install")
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, b := range blocks {
		for _, line := range strings.Split(b.Text, "\n") {
			tested[strings.TrimSpace(line)] = true
		}
	}
	var n int
	for _, block := range strings.Split(section, "```sh\n")[1:] {
		body, _, _ := strings.Cut(block, "```")
		for _, line := range strings.Split(body, "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			n++
			if !tested[line] {
				t.Errorf("README.md's install runs %q, which docs/install.md's tested commands do not", line)
			}
		}
	}
	if n == 0 {
		t.Error("README.md's install section has no commands")
	}
}

// TestArchitectureNamesEveryPackage checks that docs/architecture.md's
// package table has a row for every package under internal/ that holds
// code, so the design document cannot fall behind a move. A package of
// shared test helpers (named ...test) may instead be named, in backquotes,
// in its parent's row.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	page := read(t, filepath.Join(root, "docs", "architecture.md"))
	rows := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9/]+)/` \\|(.*)\\|$")
	for _, m := range row.FindAllStringSubmatch(page, -1) {
		rows[m[1]] = m[2]
	}
	var missing []string
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		code, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		hasCode := false
		for _, f := range code {
			hasCode = hasCode || !strings.HasSuffix(f, "_test.go")
		}
		if !hasCode {
			return nil
		}
		pkg := rel(path)
		if _, ok := rows[pkg]; ok {
			return nil
		}
		if name := filepath.Base(pkg); strings.HasSuffix(name, "test") && strings.Contains(rows[filepath.Dir(pkg)], "`"+name+"`") {
			return nil
		}
		missing = append(missing, pkg)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/architecture.md's package table has no row for %v", missing)
	}
}
