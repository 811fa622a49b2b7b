package bench

import (
	"os"
	"strings"
	"testing"
)

// TestPerformancePageParses checks the format of the generated tables of
// docs/performance.md (not their figures, which are measured): what
// benchdocs writes must stay readable by the next run's update.
func TestPerformancePageParses(t *testing.T) {
	page, err := os.ReadFile("../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := ParseDocsTables(string(page))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tables["containerd 1.6"]; !ok {
		t.Errorf("docs/performance.md has no table for containerd 1.6, the default test bed's")
	}
}

func TestDocsRuntime(t *testing.T) {
	for _, tt := range []struct{ version, want string }{
		{"1.6.20~ds1", "containerd 1.6"},
		{"v1.7.35", "containerd 1.7"},
		{"2.1.9", "containerd 2.1"},
		{"v2.2.0-rc.1", "containerd 2.2"},
		{"CRI-O 1.34.0", "CRI-O 1.34"},
	} {
		if got := DocsRuntime(tt.version); got != tt.want {
			t.Errorf("DocsRuntime(%q) = %q, want %q", tt.version, got, tt.want)
		}
	}
}

// TestUpdateDocs replaces the table of the run's runtime, adds one for a
// new runtime after the others, leaves other sections alone, and refuses a
// quick run.
func TestUpdateDocs(t *testing.T) {
	met := true
	res := func(runtime string, median float64) *Results {
		return &Results{Runtime: runtime, Rows: []Row{
			{Name: "add: rename -> RUNNING, host | network", Unit: "ms", Summary: Summary{Median: median},
				Target: &Target{Text: "median < 400 ms", Limit: 400}, Met: &met, Kubelet: "148 ms"},
			{Name: "idle 50 pods: CRI calls", Unit: "/min", NA: "needs berth's /metrics"},
		}}
	}
	doc := "# P\n\nintro\n\n" + docsBegin("containerd 1.6") + "\nold\n" + docsEnd("containerd 1.6") + "\n\noutro\n"
	doc, err := UpdateDocs(doc, res("1.6.20~ds1", 208))
	if err != nil {
		t.Fatal(err)
	}
	doc, err = UpdateDocs(doc, res("2.1.9", 552))
	if err != nil {
		t.Fatal(err)
	}
	doc, err = UpdateDocs(doc, res("1.6.21", 199))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(doc, "old") || !strings.HasPrefix(doc, "# P\n\nintro\n\n") || !strings.HasSuffix(doc, "\n\noutro\n") {
		t.Errorf("sections not replaced in place:\n%s", doc)
	}
	tables, err := ParseDocsTables(doc)
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	want := map[string]DocsRow{
		"containerd 1.6": {"add: rename -> RUNNING, host | network", "ms", "199", "median < 400 ms", "yes", "148 ms"},
		"containerd 2.1": {"add: rename -> RUNNING, host | network", "ms", "552", "median < 400 ms", "yes", "148 ms"},
	}
	for rt, row := range want {
		rows := tables[rt]
		if len(rows) != 2 || rows[0] != row || rows[1].Median != "N/A" {
			t.Errorf("%s: rows %+v, want first %+v and an N/A", rt, rows, row)
		}
	}
	if strings.Index(doc, docsBegin("containerd 1.6")) > strings.Index(doc, docsBegin("containerd 2.1")) {
		t.Errorf("a new runtime's table goes after the others")
	}
	quick := res("1.6.20", 1)
	quick.Quick = true
	if _, err := UpdateDocs(doc, quick); err == nil {
		t.Errorf("a quick run updated the page")
	}
}

func TestParseDocsTablesRefusesBadFormat(t *testing.T) {
	table := func(rows string) string {
		return docsBegin("containerd 1.6") + "\n\n" + docsHeader + rows + docsEnd("containerd 1.6")
	}
	for name, doc := range map[string]string{
		"no section":   "# nothing generated\n",
		"no end":       docsBegin("containerd 1.6") + "\n" + docsHeader + "| a | ms | 1 | | | |\n",
		"no header":    docsBegin("containerd 1.6") + "\n| a | ms | 1 | | | |\n" + docsEnd("containerd 1.6"),
		"five cells":   table("| a | ms | 1 | | |\n"),
		"median words": table("| a | ms | fast | | | |\n"),
		"met maybe":    table("| a | ms | 1 | | maybe | |\n"),
		"no rows":      table(""),
	} {
		if _, err := ParseDocsTables(doc); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
