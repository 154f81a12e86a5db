package stackfile

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/engenho/engenho/runtime/nodekey"
)

// stackYAML wraps a service body (unindented) as service "api" of stack
// "t". With cmd, a `command: run` line comes first, so body line N is file
// line N+4; without it, N+3.
func stackYAML(body string, cmd bool) string {
	var b strings.Builder
	b.WriteString("name: t\nservices:\n  api:\n")
	if cmd {
		b.WriteString("    command: run\n")
	}
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		if line == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// bodyOffset is how many file lines come before body line 1.
func bodyOffset(cmd bool) int {
	if cmd {
		return 4
	}
	return 3
}

func mustParse(t *testing.T, filename, src string) *Stack {
	t.Helper()
	st, err := Parse(filename, []byte(src))
	if err != nil {
		t.Fatalf("Parse(%s):\n%v\n--- source:\n%s", filename, err, src)
	}
	return st
}

// parseProblems parses src and returns its problems; it fails the test
// when src parses.
func parseProblems(t *testing.T, filename, src string) []Problem {
	t.Helper()
	_, err := Parse(filename, []byte(src))
	if err == nil {
		t.Fatalf("Parse(%s) accepted:\n%s", filename, src)
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("Parse error is %T, want *ParseError: %v", err, err)
	}
	if len(pe.Problems) == 0 {
		t.Fatalf("ParseError without problems")
	}
	return pe.Problems
}

func wantService(base func() Service, mutate func(*Service)) Service {
	s := base()
	if mutate != nil {
		mutate(&s)
	}
	return s
}

// apiRun is service "api" running `run`, defaults applied.
func apiRun() Service {
	s := NewService("api")
	s.Command = []string{"run"}
	return s
}

func sameService(t *testing.T, got, want Service) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := Marshal(&Stack{Name: "x", Order: []string{"x"}, Services: map[string]Service{"x": got}}, testKey)
		w, _ := Marshal(&Stack{Name: "x", Order: []string{"x"}, Services: map[string]Service{"x": want}}, testKey)
		t.Fatalf("service differs\n got: %s\nwant: %s", g, w)
	}
}

// testKey is a node key for tests (runtime/nodekey, a fixed key).
var testKey = func() NodeKey {
	k, err := nodekey.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		panic(err)
	}
	return k
}()
