package daemonconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// want is one expected problem: its line, key and a piece of its message.
type want struct {
	line int
	key  string
	msg  string
}

// sameProblems fails unless es are exactly ws (in any order).
func sameProblems(t *testing.T, es []*Error, ws []want) {
	t.Helper()
	all := Errors(es).Error()
	if len(es) != len(ws) {
		t.Fatalf("want %d problems, got %d:\n%s", len(ws), len(es), all)
	}
	for _, w := range ws {
		found := false
		for _, e := range es {
			if e.Line == w.line && e.Key == w.key && strings.Contains(e.Msg, w.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem at line %d key %s saying %q in:\n%s", w.line, w.key, w.msg, all)
		}
	}
}

// DMN-15: one load reports every problem of the file at once, each with
// its line and key, whichever stage finds it: the shape of the keys
// (unknown, duplicate, a list for a value), their values (durations,
// numbers), the rules on them (ranges, formats) and the stack files. A
// key that has a problem gets no second one from a later stage, and a
// duplicate's first value is still checked.
func TestEveryProblemAtOnceDMN15(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []want
	}{
		{"every stage", `log:
  level: verbose
  bogus: 1
sweep:
  interval: 99999999999h
probe:
  timeout: 1e400s
  interval: -5s
  retries: [1]
control:
  idle_timeout: 5
edge: {listen: "localhost"}
edge: {listen: ":1"}
stacks: [nothere.yaml, alsonot.yaml, "x/[.yaml"]
`, []want{
			{2, "log.level", `want trace, debug, info, warn or error, got "verbose"`},
			{3, "log.bogus", "unknown key (log has: level, format)"},
			{5, "sweep.interval", `"99999999999h" is too long: at most 87600h (10 years)`},
			{7, "probe.timeout", `got "1e400s": write it without an exponent`},
			{8, "probe.interval", "must be positive, got -5s"},
			{9, "probe.retries", "want a single value, got a list"},
			{11, "control.idle_timeout", `got "5": a number needs a unit`},
			{12, "edge.listen", `want HOST:PORT`},
			{13, "edge", "duplicate key (first set at line 12); remove one"},
			{14, "stacks[0]", "nothere.yaml does not exist"},
			{14, "stacks[1]", "alsonot.yaml does not exist"},
			{14, "stacks[2]", "bad glob pattern"},
		}},
		{"a section of the wrong shape skips its keys only", "log: loud\nsweep: {interval: 1ms}\n", []want{
			{1, "log", "want a mapping of keys"},
			{2, "sweep.interval", "must be at least 100ms"},
		}},
		{"stack files beside bad values", "stacks: [a.yaml, b.yaml]\ndrain: {budget: soon}\n", []want{
			{1, "stacks[0]", "a.yaml does not exist"},
			{1, "stacks[1]", "b.yaml does not exist"},
			{2, "drain.budget", `want a duration with a unit such as 90s, 5m or 1h30m, got "soon"`},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := load(t, tc.yaml)
			if c != nil || err == nil {
				t.Fatalf("accepted: %v", c)
			}
			sameProblems(t, errorsOf(t, err), tc.want)
		})
	}
}

// DMN-15: durations say what is wrong with them: too long (the bound is
// MaxDuration, 87600h), an exponent, a missing unit, negative where a key
// needs a positive one.
func TestDurationsDMN15(t *testing.T) {
	cases := []struct{ value, msg string }{
		{"99999999999h", `"99999999999h" is too long: at most 87600h (10 years)`},
		{"9223372036854775808ns", "is too long"},
		{"87601h", "is too long"},
		{"-99999999999h", "is negative and out of range"},
		{"1e400s", "write it without an exponent"},
		{"30", `got "30": a number needs a unit`},
		{"1.5", "a number needs a unit"},
		{"'30'", "a number needs a unit"},
		{"5 minutes", `want a duration with a unit such as 90s, 5m or 1h30m, got "5 minutes"`},
		{"-1s", "must be positive, got -1s"},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			_, _, err := load(t, "drain:\n  budget: "+tc.value+"\n")
			sameProblems(t, errorsOf(t, err), []want{{2, "drain.budget", tc.msg}})
		})
	}
	t.Run("list item", func(t *testing.T) {
		_, _, err := load(t, "supervision:\n  ladder:\n    delays: [1s, 99999999999h]\n")
		sameProblems(t, errorsOf(t, err), []want{{3, "supervision.ladder.delays", "item 1: \"99999999999h\" is too long"}})
	})
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv("ENGENHO_SWEEP_INTERVAL", "1e400s")
		_, _, err := load(t, "{}\n")
		es := errorsOf(t, err)
		if len(es) != 1 || es[0].Env != "ENGENHO_SWEEP_INTERVAL" || !strings.Contains(es[0].Msg, "exponent") {
			t.Fatalf("got %v", err)
		}
	})
	if c := mustLoad(t, "journal: {events: {max_age: 87600h}}\n"); c.Journal.Events.MaxAge != MaxDuration {
		t.Fatalf("87600h: %v", c.Journal.Events.MaxAge)
	}
}

// DMN-15, SEC-3: a 10k-character key or value gets a message that says
// what is wrong, quotes it cut short with its length, and fits on a line;
// a key longer than YAML's 1024-character limit gets its own message
// instead of the YAML library's misleading one.
func TestLongNamesDMN15(t *testing.T) {
	long := strings.Repeat("a", 10000)
	cases := []struct {
		name, yaml string
		line       int
		key, msg   string
	}{
		{"key over YAML's limit", long + ": 1\n", 1, "", "a key of 10000 characters; YAML reads at most 1024"},
		{"nested key over the limit", "log:\n  " + long + ": 1\n", 2, "", "a key of 10000 characters"},
		{"unknown long key", "log:\n  " + strings.Repeat("k", 200) + ": 1\n", 2, `log."` + strings.Repeat("k", 62) + `..."`, "unknown key"},
		{"node name", "node: {name: " + long + "}\n", 1, "node.name", "10000 characters long, at most 253"},
		{"group", "control: {group: " + long + "}\n", 1, "control.group", `"` + strings.Repeat("a", 61) + `..." (10000 characters) is not a group name or gid`},
		{"log level", "log: {level: " + long + "}\n", 1, "log.level", "(10000 characters)"},
		{"listen", "edge: {listen: " + long + "}\n", 1, "edge.listen", "(10000 characters)"},
		{"strategy", "supervision: {strategy: " + long + "}\n", 1, "supervision.strategy", "(10000 characters)"},
		{"duration", "sweep: {interval: " + long + "}\n", 1, "sweep.interval", "(10000 characters)"},
		{"size", "control: {max_request: 1" + long + "}\n", 1, "control.max_request", "(10000 characters)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := load(t, tc.yaml)
			es := errorsOf(t, err)
			sameProblems(t, es, []want{{tc.line, tc.key, tc.msg}})
			if line := es[0].Error(); len(line) > 400 || strings.Contains(line, strings.Repeat("a", 100)) {
				t.Errorf("message is not one readable line (%d bytes): %.500s", len(line), line)
			}
		})
	}
}

// ResolveStacks names every listed stack file that is missing, not only
// the first.
func TestResolveStacksEveryMissing(t *testing.T) {
	c := &Config{File: "/nonexistent/engenho.yaml", Stacks: []string{"a.yaml", "b.yaml"}}
	_, err := ResolveStacks(c)
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 || !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v", err)
	}
	for i, e := range es {
		if e.Key != fmt.Sprintf("stacks[%d]", i) {
			t.Errorf("error %d: key %s", i, e.Key)
		}
	}
}

// DMN-15, DMN-7: DataDirOf finds the data directory of a config that does
// not load, as Load would resolve it, so the failed boot is served where
// the operator looks.
func TestDataDirOfBrokenConfig(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "engenho.yaml", "data_dir: state\nlog: {level: loud}\nbogus: 1\n")
	if _, _, err := Load(p); err == nil {
		t.Fatal("the broken config loaded")
	}
	if got := DataDirOf(p, Overrides{}); got != dir+"/state" {
		t.Errorf("DataDirOf = %s, want %s/state", got, dir)
	}
	if got := DataDirOf(p, Overrides{DataDir: "/flag"}); got != "/flag" {
		t.Errorf("the flag: %s", got)
	}
	t.Setenv("ENGENHO_DATA_DIR", "/env")
	if got := DataDirOf(p, Overrides{}); got != "/env" {
		t.Errorf("the environment: %s", got)
	}
	t.Setenv("ENGENHO_DATA_DIR", "")
	os.Unsetenv("ENGENHO_DATA_DIR")
	for _, content := range []string{"", "[", "data_dir: [a]\n", "- a\n", "log: {}\n"} {
		writeFile(t, dir, "engenho.yaml", content)
		if got := DataDirOf(p, Overrides{}); got != Defaults().DataDir {
			t.Errorf("%q: %s, want the default", content, got)
		}
	}
	if got := DataDirOf(filepath.Join(dir, "missing.yaml"), Overrides{}); got != Defaults().DataDir {
		t.Errorf("a missing file: %s", got)
	}
}

// SVC-24, DMN-15: a bad ports.instance_range is an error at its line that
// shows the expected form; a good one is read.
func TestInstanceRangeSVC24(t *testing.T) {
	for _, bad := range []string{`"20999-20000"`, "abc", `"0-5"`, `"1023-2000"`, `"20000-70000"`, `""`} {
		t.Run(bad, func(t *testing.T) {
			_, _, err := load(t, "ports:\n  instance_range: "+bad+"\n")
			sameProblems(t, errorsOf(t, err), []want{{2, "ports.instance_range", "want LOW-HIGH, 1024 <= LOW <= HIGH <= 65535, got"}})
		})
	}
	if r := mustLoad(t, "{}\n").Ports.Range(); r.Low != 20000 || r.High != 20999 {
		t.Fatalf("default range %v, want 20000-20999", r)
	}
	if r := mustLoad(t, "ports: {instance_range: 30000-30009}\n").Ports.Range(); r.Low != 30000 || r.High != 30009 {
		t.Fatalf("range %v, want 30000-30009", r)
	}
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv("ENGENHO_PORTS_INSTANCE_RANGE", "5-1")
		_, _, err := load(t, "{}\n")
		es := errorsOf(t, err)
		if len(es) != 1 || es[0].Key != "ports.instance_range" || !strings.Contains(es[0].Msg, "LOW-HIGH") {
			t.Fatalf("got %v", err)
		}
	})
}
