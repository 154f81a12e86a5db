package stackfile

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpusEnv is the apply environment the corpus is loaded with: what its
// files require (${VAR:?}) or take from the shell (value-less keys).
var corpusEnv = map[string]string{"GRAFANA_PASSWORD": "admin-pw", "API_TOKEN": "tok", "MINIO_ROOT_PASSWORD": "minio-pw"}

// refusals are the one line each thing engenho cannot run gets.
var refusals = map[string]string{
	"build": "build the image first",
	"udp":   "TCP only",
}

// Issue 15's acceptance: every Compose file of the corpus (written for
// these tests in the shapes real projects ship, testdata/compose) loads
// as `engenho config` loads it, warnings allowed, or is refused with
// exactly one problem, the one line for build: or UDP.
func TestComposeCorpus(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "compose"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) < 10 {
		t.Fatalf("the corpus has %d files", len(files))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			expect := corpusExpectation(t, data)
			st, err := ParseWith(path, data, Options{Dir: dir, Env: corpusEnv})
			if expect == "load" {
				if err != nil {
					t.Fatalf("refused:\n%v", err)
				}
				for _, w := range append(st.Warnings, OfflineWarnings(st)...) {
					t.Logf("warning: %s", w)
				}
				if _, err := RenderYAML(st); err != nil {
					t.Fatalf("render: %v", err)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) || len(pe.Problems) != 1 || !strings.Contains(pe.Problems[0].Msg, refusals[expect]) {
				t.Fatalf("want one problem saying %q, got:\n%v", refusals[expect], err)
			}
		})
	}
}

// corpusExpectation reads the file's first line: "# expect: load" or
// "# expect: refused: build|udp".
func corpusExpectation(t *testing.T, data []byte) string {
	t.Helper()
	line, _, _ := bufio.NewReader(bytes.NewReader(data)).ReadLine()
	rest, ok := strings.CutPrefix(string(line), "# expect: ")
	if !ok {
		t.Fatalf("the first line says no expectation: %q", line)
	}
	if rest == "load" {
		return rest
	}
	what, ok := strings.CutPrefix(rest, "refused: ")
	if _, known := refusals[what]; !ok || !known {
		t.Fatalf("unknown expectation %q", rest)
	}
	return what
}
