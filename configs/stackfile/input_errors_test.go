package stackfile

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// problemAt finds the problem at line with key; it fails the test if
// there is none.
func problemAt(t *testing.T, ps []Problem, line int, key string) Problem {
	t.Helper()
	for _, p := range ps {
		if p.Line == line && p.Key == key {
			return p
		}
	}
	t.Fatalf("no problem at line %d key %q in:\n%s", line, key, (&ParseError{Problems: ps}).Error())
	return Problem{}
}

// SVC-1: every mistake of a file is reported in one pass, each with its
// file, line and key, whatever stage finds it (YAML structure, values,
// checks between keys), and nothing else is.
func TestEveryProblemAtOnceSVC1(t *testing.T) {
	src := `name: shop
services:
  web:
    command: ["/bin/web"]
    healthcheck:
      test: ["CMD", "true"]
      interval: 99999999999h
      timeout: 1e400s
      start_period: -5s
    deploy:
      replicas: three
    env:
      A: x
      A: y
    bogus: 1
  web:
    command: ["/bin/true"]
  worker:
    command: ["/bin/true"]
    depends_on: [nothere]
    stop_grace_period: 90
`
	ps := parseProblems(t, "shop.yaml", src)
	want := []struct {
		line int
		key  string
		kind error
		msg  string
	}{
		{7, "services.web.healthcheck.interval", ErrValue, `"99999999999h" is too long: at most 87600h`},
		{8, "services.web.healthcheck.timeout", ErrType, "without an exponent"},
		{9, "services.web.healthcheck.start_period", ErrValue, "0s or more"},
		{11, "services.web.deploy.replicas", ErrType, `want a non-negative integer, got "three"`},
		{14, "services.web.env.A", ErrValue, "key given twice (first at line 13)"},
		{15, "services.web.bogus", ErrUnknownKey, "unknown key"},
		{16, "services.web", ErrValue, "key given twice (first at line 3)"},
		{20, "services.worker.depends_on[0]", ErrDependency, `no service "nothere"`},
		{21, "services.worker.stop_grace_period", ErrType, "a number needs a unit"},
	}
	if len(ps) != len(want) {
		t.Fatalf("want %d problems, got %d:\n%s", len(want), len(ps), (&ParseError{Problems: ps}).Error())
	}
	for _, w := range want {
		p := problemAt(t, ps, w.line, w.key)
		if p.File != "shop.yaml" || !errors.Is(p.Err, w.kind) || !strings.Contains(p.Msg, w.msg) {
			t.Errorf("line %d %s: %v %q, want %v %q", w.line, w.key, p.Err, p.Msg, w.kind, w.msg)
		}
	}
}

// SVC-1: a key given twice is refused (YAML would keep one of them
// silently), naming the line of each.
func TestDuplicateKeysSVC1(t *testing.T) {
	cases := []struct {
		name, src string
		line      int
		key       string
		first     int
	}{
		{"top level", "name: a\nname: b\nservices: {x: {command: c}}\n", 2, "name", 1},
		{"service", "services:\n  x:\n    command: c\n  x:\n    command: d\n", 4, "services.x", 2},
		{"service key", "services:\n  x:\n    command: c\n    command: d\n", 4, "services.x.command", 3},
		{"nested", "services:\n  x:\n    command: c\n    deploy:\n      replicas: 1\n      replicas: 2\n", 6, "services.x.deploy.replicas", 5},
		{"env map", "services:\n  x:\n    command: c\n    env:\n      A: 1\n      A: 2\n", 6, "services.x.env.A", 5},
		{"env list", "services:\n  x:\n    command: c\n    env:\n      - A=1\n      - A=2\n", 6, "services.x.env.A", 5},
		{"flow map", "services: {x: {command: c, command: d}}\n", 1, "services.x.command", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := parseProblems(t, "d.yaml", tc.src)
			if len(ps) != 1 {
				t.Fatalf("want one problem, got:\n%s", (&ParseError{Problems: ps}).Error())
			}
			p := problemAt(t, ps, tc.line, tc.key)
			if !strings.Contains(p.Msg, "given twice (first at line "+strconv.Itoa(tc.first)+")") {
				t.Errorf("message %q does not name the first line %d", p.Msg, tc.first)
			}
		})
	}
}

// SVC-1, SEC-3: a name of 10k characters (or any too long or badly
// formed one) gets a message that says what is wrong with it, quotes it
// cut short, and fits on a line; a key longer than YAML's 1024-character
// limit gets its own message instead of the YAML library's misleading
// "mapping values are not allowed in this context".
func TestLongNamesSVC1SEC3(t *testing.T) {
	long := strings.Repeat("a", 10000)
	mid := strings.Repeat("b", 100)
	cases := []struct {
		name, src string
		line      int
		key       string
		kind      error
		msg       string
	}{
		{"service name over YAML's key limit", "services:\n  " + long + ":\n    command: c\n", 2, "", ErrSyntax, "a key of 10000 characters: YAML reads at most 1024"},
		{"quoted service name over the limit", "services:\n  \"" + long + "\":\n    command: c\n", 2, "", ErrSyntax, "a key of 10002 characters"}, // its quotes count, as YAML counts them
		{"flow service name over the limit", "services: {" + long + ": {command: c}}\n", 1, "", ErrSyntax, "a key of 10000 characters"},
		{"service name", "services:\n  " + mid + ":\n    command: c\n", 2, "services." + mid[:48] + "...(100 characters)", ErrValue, "invalid service name \"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb...\" (100 characters): 100 characters long, at most 63"},
		{"service name capital", "services:\n  Web:\n    command: c\n", 2, "services.Web", ErrValue, `invalid service name "Web": starts with 'W'`},
		{"service name dot", "services:\n  we.b:\n    command: c\n", 2, "services.we.b", ErrValue, `has '.' at position 3`},
		{"stack name", "name: " + long + "\nservices: {x: {command: c}}\n", 1, "name", ErrValue, "invalid stack name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\" (10000 characters): 10000 characters long, at most 63"},
		{"driver", "services: {x: {command: c, driver: " + long + "}}\n", 1, "services.x.driver", ErrValue, "invalid driver name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\" (10000 characters): 10000 characters long"},
		{"sidecar", "services: {x: {command: c, sidecars: [{name: " + long + ", command: d}]}}\n", 1, "services.x.sidecars[0].name", ErrValue, "invalid sidecar name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\" (10000 characters): 10000 characters long"},
		{"edge host", "services: {x: {command: c, x-engenho: {host: " + long + "}}}\n", 1, "services.x.x-engenho.host", ErrValue, "10000 characters long, at most 253"},
		{"host label", "services: {x: {command: c, x-engenho: {host: " + strings.Repeat("h", 70) + ".example.com}}}\n", 1, "services.x.x-engenho.host", ErrValue, "a label of 70 characters, at most 63"},
		{"depends_on", "services: {x: {command: c, depends_on: [" + long + "]}}\n", 1, "services.x.depends_on[0]", ErrDependency, "no service \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\" (10000 characters) in this stack"},
		{"env name", "services: {x: {command: c, env: {" + strings.Repeat("E", 300) + ": v}}}\n", 1, "services.x.env." + strings.Repeat("E", 48) + "...(300 characters)", ErrValue, "invalid variable name: 300 characters long, at most 256"},
		{"env list name", "services: {x: {command: c, env: [" + strings.Repeat("E", 300) + "=v]}}\n", 1, "services.x.env[0]", ErrValue, "300 characters long, at most 256"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := parseProblems(t, "long.yaml", tc.src)
			if len(ps) != 1 {
				t.Fatalf("want one problem, got %d:\n%.2000s", len(ps), (&ParseError{Problems: ps}).Error())
			}
			p := problemAt(t, ps, tc.line, tc.key)
			if !errors.Is(p.Err, tc.kind) || !strings.Contains(p.Msg, tc.msg) {
				t.Errorf("got %v %q, want %v %q", p.Err, p.Msg, tc.kind, tc.msg)
			}
			if line := p.String(); len(line) > 300 || strings.Contains(line, strings.Repeat("a", 100)) {
				t.Errorf("message is not one readable line (%d bytes): %.400s", len(line), line)
			}
		})
	}
}

// SVC-1: durations out of range or mistyped say what is wrong: too long
// (not "want a duration"), negative, an exponent, a missing or unknown
// unit. The bound, MaxDuration (87600h), keeps every sum and product of
// durations (the rollout deadline) from overflowing.
func TestDurationsSVC1(t *testing.T) {
	cases := []struct {
		value string
		kind  error
		msg   string
	}{
		{"99999999999h", ErrValue, `"99999999999h" is too long: at most 87600h (10 years)`},
		{"9223372036854775808ns", ErrValue, "is too long"},
		{"87601h", ErrValue, `"87601h" is too long`},
		{"-99999999999h", ErrValue, "want a duration of 0s or more"},
		{"-5s", ErrValue, `want a duration of 0s or more, got "-5s"`},
		{"1e400s", ErrType, `got "1e400s": write it without an exponent`},
		{"1e3s", ErrType, "without an exponent"},
		{"30", ErrType, `got "30": a number needs a unit`},
		{"1.5", ErrType, "a number needs a unit"},
		{`"30"`, ErrType, "a number needs a unit"},
		{"5 minutes", ErrType, "units ns, us, ms, s, m, h"},
		{"5d", ErrType, "units ns, us, ms, s, m, h"},
		{"true", ErrType, "want a duration like 30s"},
		{"[1s]", ErrType, "want a duration like 30s"},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			src := "services:\n  x:\n    command: c\n    stop_grace_period: " + tc.value + "\n"
			ps := parseProblems(t, "d.yaml", src)
			if len(ps) != 1 {
				t.Fatalf("want one problem:\n%s", (&ParseError{Problems: ps}).Error())
			}
			p := problemAt(t, ps, 4, "services.x.stop_grace_period")
			if !errors.Is(p.Err, tc.kind) || !strings.Contains(p.Msg, tc.msg) {
				t.Errorf("got %v %q, want %v %q", p.Err, p.Msg, tc.kind, tc.msg)
			}
		})
	}
	for _, ok := range []string{"0", "87600h", "1h30m", "500ms", "+5s"} {
		mustParse(t, "d.yaml", "services:\n  x:\n    command: c\n    stop_grace_period: "+ok+"\n")
	}
	// The largest values a file may hold keep the deadline positive.
	hc := Healthcheck{Kind: ProbeExec, Exec: []string{"x"}, Interval: MaxDuration, Retries: math.MaxInt32, StartPeriod: MaxDuration}
	if d := hc.Deadline(); d <= 0 || d != time.Duration(math.MaxInt64) {
		t.Fatalf("deadline %v, want saturated", d)
	}
	hc = Healthcheck{Kind: ProbeExec, Exec: []string{"x"}, Interval: time.Second, Retries: 3}
	if d := hc.Deadline(); d != 93*time.Second {
		t.Fatalf("deadline %v, want 93s", d)
	}
}

// SVC-1, SVC-2: a file with mistakes still has its well-formed services
// checked against the node, so one answer names both the file's problems
// and the node's (a missing driver, a busy port), in line order; the
// services with mistakes are not asked about.
func TestValidateRestSVC1SVC2(t *testing.T) {
	node, drv := newFakeNode(t)
	node.busy[8080] = true
	src := `name: shop
services:
  bad:
    command: ["/bin/web"]
    comand: typo
    ports: ["9090:80"]
  far:
    command: ["/bin/web"]
    driver: incus
  busy:
    command: ["/bin/web"]
    ports: ["8080:80"]
  fine:
    command: ["/bin/web"]
`
	_, err := Parse("shop.yaml", []byte(src))
	err = ValidateRest(context.Background(), err, node)
	var pe *ParseError
	if !errors.As(err, &pe) || len(pe.Problems) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
	problemAt(t, pe.Problems, 5, "services.bad.comand")
	problemAt(t, pe.Problems, 9, "services.far.driver")
	problemAt(t, pe.Problems, 12, "services.busy.ports[0]")
	for _, kind := range []error{ErrUnknownKey, ErrDriverMissing, ErrPortBusy} {
		if !errors.Is(err, kind) {
			t.Errorf("errors.Is(%v) false", kind)
		}
	}
	for _, spec := range drv.specs {
		if strings.Contains(spec.Name, "-bad-") {
			t.Errorf("the service with a mistake was shown to the driver: %s", spec.Name)
		}
	}
	for _, p := range node.asked {
		if p == 9090 {
			t.Error("the port of the service with a mistake was checked")
		}
	}
	// A clean file and other errors are passed through unchanged.
	if ValidateRest(context.Background(), nil, node) != nil {
		t.Error("nil became an error")
	}
	other := errors.New("other")
	if ValidateRest(context.Background(), other, node) != other {
		t.Error("another error was changed")
	}
}

// SVC-2: stacks applied in one request may each be free on the node but
// not publish the same port, route the same edge host, or be one stack
// twice; each clash names the other file.
func TestValidateTogetherSVC2(t *testing.T) {
	a := mustParse(t, "a.yaml", "name: a\nservices:\n  web:\n    command: [x]\n    ports: [\"8080:80\"]\n    x-engenho: {host: a.example.com}\n")
	b := mustParse(t, "b.yaml", "name: b\nservices:\n  api:\n    command: [x]\n    ports: [\"8080:80\"]\n    x-engenho: {host: a.example.com}\n")
	c := mustParse(t, "c.yaml", "name: a\nservices:\n  other:\n    command: [x]\n")
	errs := ValidateTogether([]*Stack{a, b, c})
	if len(errs) != 2 {
		t.Fatalf("want 2 refused stacks, got %v", errs)
	}
	msg := errs[0].Error()
	for _, want := range []string{"b.yaml:5: services.api.ports[0]: port 8080 is also published by stack a service web (a.yaml)", "b.yaml:6: services.api.x-engenho.host: host a.example.com is also used by stack a service web (a.yaml)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if !errors.Is(errs[0], ErrPortClaimed) || !errors.Is(errs[0], ErrHostClaimed) {
		t.Error("kinds not exposed")
	}
	if !strings.Contains(errs[1].Error(), "c.yaml:1: name: stack a is also defined by a.yaml in this request") {
		t.Errorf("duplicate stack: %v", errs[1])
	}
	if errs := ValidateTogether([]*Stack{a, mustParse(t, "d.yaml", "name: d\nservices: {x: {command: y}}\n")}); len(errs) != 0 {
		t.Errorf("independent stacks refused: %v", errs)
	}
}
