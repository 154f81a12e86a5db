package cmd

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The rule IDs tests and code cite are explained in docs/rules.md, so a
// reader without the spec folder can follow them. These tests keep that
// page complete: a rule ID written anywhere in the tree needs its line.

const rulesDoc = "docs/rules.md"

// ruleID is a rule ID as comments and docs write it: SVC-12.
var ruleID = regexp.MustCompile(`\b(SUP|SVC|ACT|DMN|DRV|CHS|PERF|REL|SEC)-([0-9]+)\b`)

// compactID is a rule ID as test names write it: TestSVC11HungDriver.
var compactID = regexp.MustCompile(`(SUP|SVC|ACT|DMN|DRV|CHS|PERF|REL|SEC)([0-9]+)`)

// testFunc is the name of a test, benchmark, fuzz target or example.
var testFunc = regexp.MustCompile(`func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)

// ruleRow is one line of docs/rules.md: | ID | meaning | [page](page) |.
var ruleRow = regexp.MustCompile(`^\| ((?:SUP|SVC|ACT|DMN|DRV|CHS|PERF|REL|SEC)-[0-9]+) \| (.*) \| \[([^\]]+)\]\(([^)]+)\) \|$`)

// areaOrder sorts IDs the way docs/rules.md groups them.
var areaOrder = map[string]int{"SUP": 0, "SVC": 1, "ACT": 2, "DMN": 3, "DRV": 4, "CHS": 5, "PERF": 6, "REL": 7, "SEC": 8}

// scanned says whether a file's rule IDs must be documented: Go code and
// tests, and the repository's own docs and scripts.
func scanned(path string) bool {
	switch filepath.Ext(path) {
	case ".go", ".md", ".sh", ".yaml", ".yml":
		return true
	}
	return filepath.Base(path) == "Makefile"
}

// usedRuleIDs walks root and returns every rule ID cited in a scanned file,
// with the places (file:line) that cite it. docs/rules.md itself is skipped:
// it is the definition, not a use.
func usedRuleIDs(root string) (map[string][]string, error) {
	used := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !scanned(path) || filepath.ToSlash(rel) == rulesDoc {
			return nil
		}
		return scanFile(path, filepath.ToSlash(rel), used)
	})
	return used, err
}

func scanFile(path, rel string, used map[string][]string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		at := fmt.Sprintf("%s:%d", rel, n)
		ids := ruleID.FindAllString(line, -1)
		if strings.HasSuffix(rel, ".go") {
			ids = append(ids, testNameIDs(line)...)
		}
		for _, id := range ids {
			if at0 := used[id]; len(at0) == 0 || at0[len(at0)-1] != at {
				used[id] = append(used[id], at)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	return nil
}

// testNameIDs returns the rule IDs a test name on line cites in compact
// form: TestDefaultsSUP10SUP11 cites SUP-10 and SUP-11. An area prefix
// right after another capital (HTTPSEC1) is part of a word, not an ID.
func testNameIDs(line string) []string {
	var ids []string
	for _, fn := range testFunc.FindAllStringSubmatch(line, -1) {
		name := fn[1]
		for _, m := range compactID.FindAllStringSubmatchIndex(name, -1) {
			if m[0] > 0 && name[m[0]-1] >= 'A' && name[m[0]-1] <= 'Z' {
				continue
			}
			ids = append(ids, name[m[2]:m[3]]+"-"+name[m[4]:m[5]])
		}
	}
	return ids
}

// ruleLine is one documented rule.
type ruleLine struct {
	id, meaning, page string
	line              int
}

// documentedRules parses the table rows of docs/rules.md.
func documentedRules(path string) ([]ruleLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rules []ruleLine
	for i, line := range strings.Split(string(data), "\n") {
		if m := ruleRow.FindStringSubmatch(line); m != nil {
			rules = append(rules, ruleLine{id: m[1], meaning: m[2], page: m[4], line: i + 1})
		}
	}
	return rules, nil
}

// undocumented returns the used IDs that have no line, in the page's order.
func undocumented(used map[string][]string, rules []ruleLine) []string {
	have := map[string]bool{}
	for _, r := range rules {
		have[r.id] = true
	}
	var missing []string
	for id := range used {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	sortIDs(missing)
	return missing
}

func sortIDs(ids []string) {
	key := func(id string) (int, int) {
		area, num, _ := strings.Cut(id, "-")
		n, _ := strconv.Atoi(num)
		return areaOrder[area], n
	}
	sort.Slice(ids, func(i, j int) bool {
		ai, ni := key(ids[i])
		aj, nj := key(ids[j])
		if ai != aj {
			return ai < aj
		}
		return ni < nj
	})
}

// repoRoot is the module root, one level above cmd/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

// missingReport is the failure message: one line per missing ID with the
// first places that cite it.
func missingReport(missing []string, used map[string][]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s has no line for %d rule ID(s) used in the tree.\n", rulesDoc, len(missing))
	b.WriteString("Add a row `| ID | one-sentence meaning | [page.md](page.md) |` for each, under\n")
	b.WriteString("\"The project's own additions\" when the spec does not define it:\n")
	for _, id := range missing {
		at := used[id]
		shown := at
		if len(shown) > 3 {
			shown = shown[:3]
		}
		fmt.Fprintf(&b, "  %-8s %s", id, strings.Join(shown, ", "))
		if len(at) > len(shown) {
			fmt.Fprintf(&b, " (+%d more)", len(at)-len(shown))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestEveryCitedRuleIDIsInRulesDoc(t *testing.T) {
	root := repoRoot(t)
	used, err := usedRuleIDs(root)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := documentedRules(filepath.Join(root, rulesDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 || len(rules) == 0 {
		t.Fatalf("found %d cited rule IDs and %d rows in %s: the scan or the page's row format is broken", len(used), len(rules), rulesDoc)
	}
	if missing := undocumented(used, rules); len(missing) > 0 {
		t.Fatal(missingReport(missing, used))
	}
}

// Every row has a one-sentence meaning and a page that exists, and no ID
// is listed twice.
func TestRulesDocRowsAreComplete(t *testing.T) {
	root := repoRoot(t)
	rules, err := documentedRules(filepath.Join(root, rulesDoc))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rules {
		where := fmt.Sprintf("%s:%d (%s)", rulesDoc, r.line, r.id)
		if prev, ok := seen[r.id]; ok {
			t.Errorf("%s: listed again, first at line %d", where, prev)
		}
		seen[r.id] = r.line
		meaning := strings.TrimSpace(r.meaning)
		if meaning == "" || !strings.HasSuffix(meaning, ".") {
			t.Errorf("%s: the meaning must be one sentence ending with a full stop, got %q", where, meaning)
		}
		if strings.Contains(meaning, "../shared") {
			t.Errorf("%s: points outside the repository", where)
		}
		if _, err := os.Stat(filepath.Join(root, "docs", r.page)); err != nil {
			t.Errorf("%s: page %s: %v", where, r.page, err)
		}
	}
	// A row that does not match the format is not counted as documenting
	// its ID; catch it here instead of as a confusing "missing" later.
	data, err := os.ReadFile(filepath.Join(root, rulesDoc))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "| ") && ruleID.MatchString(strings.SplitN(line, "|", 3)[1]) && !ruleRow.MatchString(line) {
			t.Errorf("%s:%d: row not in the form `| ID | meaning | [page.md](page.md) |`: %s", rulesDoc, i+1, line)
		}
	}
}

// The check is not vacuous: an ID planted in a Go comment and one in a
// test name are both reported, with where they are, and a documented one
// is not.
func TestRuleScanReportsPlantedIDs(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The planted IDs are put together at run time, so this file itself
	// cites none that the page lacks.
	svc99, dmn77, perf99, rel77 := "SVC"+"-99", "DMN"+"-77", "PERF"+"-99", "REL"+"-77"
	write("runtime/x/x.go", "package x\n\n// Holds "+svc99+" and SUP-1 (see SVC-6..SVC-11).\n")
	write("runtime/x/x_test.go", "package x\n\nfunc TestDefaults"+strings.ReplaceAll(dmn77, "-", "")+"ACT3(t *testing.T) {}\n"+
		"func TestHTTPSEC1NotAnID(t *testing.T) {}\n")
	write(".git/objects/y.go", "// "+perf99+" inside .git is not the tree\n")
	write(rulesDoc, "| SUP-1 | The tree. | [x.md](x.md) |\n| SVC-6 | A replica. | [x.md](x.md) |\n"+
		"| SVC-11 | Bounded. | [x.md](x.md) |\n| ACT-3 | Wake. | [x.md](x.md) |\n"+
		"| "+rel77+" | Only documented, never used. | [x.md](x.md) |\n")

	used, err := usedRuleIDs(root)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := documentedRules(filepath.Join(root, rulesDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 5 {
		t.Fatalf("parsed %d rows, want 5: %+v", len(rules), rules)
	}
	missing := undocumented(used, rules)
	if got, want := strings.Join(missing, " "), svc99+" "+dmn77; got != want {
		t.Fatalf("missing = %q, want %q (used: %v)", got, want, used)
	}
	report := missingReport(missing, used)
	for _, want := range []string{svc99 + "   runtime/x/x.go:3", dmn77 + "   runtime/x/x_test.go:3", "2 rule ID(s)"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if _, ok := used["SEC-1"]; ok {
		t.Errorf("HTTPSEC1 in a test name was taken for SEC-1")
	}
}

func TestRuleIDsSortByAreaThenNumber(t *testing.T) {
	ids := []string{"SEC-1", "SVC-10", "SUP-19", "SVC-9", "SUP-2", "PERF-1"}
	sortIDs(ids)
	if got, want := strings.Join(ids, " "), "SUP-2 SUP-19 SVC-9 SVC-10 PERF-1 SEC-1"; got != want {
		t.Fatalf("sorted = %q, want %q", got, want)
	}
}
