package invariant

import (
	"strings"
	"testing"

	"github.com/engenho/engenho/runtime/lifecycle"
)

// REL-5: a Go trace in the daemon's output, or the daemon gone, breaks
// no-trace; its own JSON lines, even about a recovered panic, do not.
func TestCheckNoTrace(t *testing.T) {
	ok := []byte(`{"level":"error","message":"panic: recovered in replica"}` + "\n" + `{"level":"info"}` + "\n")
	if vs := CheckNoTrace("a", ok, true); len(vs) != 0 {
		t.Fatalf("clean log: %v", vs)
	}
	trace := append(append([]byte{}, ok...), "panic: runtime error: index out of range [3] with length 0\n\ngoroutine 77 [running]:\n"...)
	if vs := CheckNoTrace("a", trace, true); len(vs) != 1 || vs[0].Invariant != NoTrace || !vs[0].Safety {
		t.Fatalf("trace: %v", vs)
	}
	if vs := CheckNoTrace("a", ok, false); len(vs) != 1 || !strings.Contains(vs[0].Evidence, "exited") {
		t.Fatalf("exited: %v", vs)
	}
}

// REL-5: the held state must be failed/hold, class corrupt, naming the
// file and the command.
func TestCheckTold(t *testing.T) {
	reason := "journal /d/journal/000002.sst: table is damaged; the daemon holds; `engenho reinit journal` moves it"
	held := lifecycle.State{Name: lifecycle.Failed, Retry: lifecycle.RetryHold,
		LastError: &lifecycle.Failure{Phase: lifecycle.PhaseOpenJournal, Class: lifecycle.CauseCorrupt, Reasons: []string{reason}}}
	if vs := CheckTold("a", held, "/d/journal/000002.sst", "engenho reinit journal"); len(vs) != 0 {
		t.Fatalf("told: %v", vs)
	}
	cases := map[string]lifecycle.State{
		"running": {Name: lifecycle.Running},
		"backoff": func() lifecycle.State { s := held; s.Retry = lifecycle.RetryBackoff; return s }(),
		"transient": func() lifecycle.State {
			s := held
			s.LastError = &lifecycle.Failure{Class: lifecycle.CauseTransient, Reasons: []string{reason}}
			return s
		}(),
	}
	for name, st := range cases {
		if vs := CheckTold("a", st, "/d/journal/000002.sst", "engenho reinit journal"); len(vs) != 1 || vs[0].Invariant != Told {
			t.Errorf("%s: %v", name, vs)
		}
	}
	if vs := CheckTold("a", held, "/d/journal/MANIFEST", "engenho reinit journal"); len(vs) != 1 {
		t.Errorf("another file: %v", vs)
	}
	if vs := CheckTold("a", held, "/d/journal/000002.sst", "engenho retry"); len(vs) != 1 {
		t.Errorf("another command: %v", vs)
	}
}
