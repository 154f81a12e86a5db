package ports

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// SVC-24: the range's syntax, LOW-HIGH with 1024 <= LOW <= HIGH <= 65535.
func TestSVC24ParseRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Range
		ok   bool
	}{
		{"20000-20999", Range{20000, 20999}, true},
		{" 1024-65535 ", Range{1024, 65535}, true},
		{"30000-30000", Range{30000, 30000}, true}, // one port is a range
		{"20999-20000", Range{}, false},            // reversed
		{"abc", Range{}, false},
		{"0-5", Range{}, false},         // privileged and port 0
		{"1023-2000", Range{}, false},   // LOW below 1024
		{"20000-65536", Range{}, false}, // HIGH past the last port
		{"20000-", Range{}, false},
		{"-20000", Range{}, false},
		{"", Range{}, false},
	} {
		got, err := ParseRange(tc.in)
		if tc.ok {
			if err != nil || got != tc.want {
				t.Errorf("ParseRange(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, ErrBadRange) {
			t.Errorf("ParseRange(%q) = %v, %v; want an ErrBadRange", tc.in, got, err)
		}
	}
}

// SVC-24: the walk starts after the newest port handed out and wraps; a port
// just released comes last; ports in use never come.
func TestSVC24CandidatesTable(t *testing.T) {
	r := Range{20000, 20004}
	s := NewState(r)
	if got := Candidates(s); !equal(got, []int{20000, 20001, 20002, 20003, 20004}) {
		t.Fatalf("fresh: %v", got)
	}
	s = Take(s, 20000)
	s = Take(s, 20001)
	if got := Candidates(s); !equal(got, []int{20002, 20003, 20004}) {
		t.Fatalf("after two: %v", got)
	}
	s = Release(s, 20001) // just released: the last candidate, not the first
	if got := Candidates(s); !equal(got, []int{20002, 20003, 20004, 20001}) {
		t.Fatalf("after releasing the newest: %v", got)
	}
	s = Take(Take(Take(s, 20002), 20003), 20004)
	s = Release(s, 20000)
	if got := Candidates(s); !equal(got, []int{20000, 20001}) { // wrapped
		t.Fatalf("wrapped: %v", got)
	}
	s = Take(Take(s, 20000), 20001)
	if got := Candidates(s); len(got) != 0 {
		t.Fatalf("spent: %v", got)
	}
}

// SVC-24: after a daemon restart the ports of adopted instances are in use,
// and the walk starts after the highest of them.
func TestSVC24AdoptedPortsCount(t *testing.T) {
	s := NewState(Range{20000, 20009})
	s = Adopt(s, 20003)
	s = Adopt(s, 20001)
	s = Adopt(s, 8080) // outside the range (a fixed host port): in use, no effect on the walk
	if got := Candidates(s); !equal(got, []int{20004, 20005, 20006, 20007, 20008, 20009, 20000, 20002}) {
		t.Fatalf("after adoption: %v", got)
	}
	s = Take(s, 20004)
	s = Adopt(s, 20008) // adopted after a hand-out: Last stays the newest handed out
	if got := Candidates(s)[0]; got != 20005 {
		t.Fatalf("first candidate %d, want 20005", got)
	}
}

// op is one step of the exhaustive and property tests.
type op struct {
	kind int // 0 take the first candidate, 1 release, 2 adopt
	port int
}

// check holds the invariants of Candidates for any state reached by ops:
// every free port of the range exactly once, none in use, and in cyclic
// order starting right after Last.
func check(t interface{ Fatalf(string, ...any) }, s State) {
	got := Candidates(s)
	seen := map[int]bool{}
	for _, p := range got {
		if !s.Range.Contains(p) || s.InUse[p] || seen[p] {
			t.Fatalf("candidate %d: out of range, in use or twice (%v, in use %v)", p, got, s.InUse)
		}
		seen[p] = true
	}
	for p := s.Range.Low; p <= s.Range.High; p++ {
		if !s.InUse[p] && !seen[p] {
			t.Fatalf("free port %d missing from %v", p, got)
		}
	}
	dist := func(p int) int { // steps after Last, 1..Size
		if !s.Range.Contains(s.Last) {
			return p - s.Range.Low + 1
		}
		return (p-s.Last-1+s.Range.Size())%s.Range.Size() + 1
	}
	for i := 1; i < len(got); i++ {
		if dist(got[i-1]) >= dist(got[i]) {
			t.Fatalf("not in order after %d: %v", s.Last, got)
		}
	}
}

func apply(s State, o op) State {
	switch o.kind {
	case 0:
		if c := Candidates(s); len(c) > 0 {
			return Take(s, c[0])
		}
		return s
	case 1:
		return Release(s, o.port)
	default:
		return Adopt(s, o.port)
	}
}

// SVC-24, exhaustively over small ranges: every sequence of up to 4
// operations on ranges of 1 to 3 ports keeps the invariants, a port taken
// is never handed out again before it is released, and a port released
// right after it was handed out is the last candidate.
func TestSVC24CandidatesExhaustive(t *testing.T) {
	for size := 1; size <= 3; size++ {
		r := Range{30000, 30000 + size - 1}
		var all []op
		all = append(all, op{kind: 0})
		for p := r.Low - 1; p <= r.High+1; p++ { // one port either side
			all = append(all, op{1, p}, op{2, p})
		}
		var walk func(s State, depth int)
		walk = func(s State, depth int) {
			check(t, s)
			if c := Candidates(s); len(c) > 0 {
				took := Take(s, c[0])
				for _, p := range Candidates(took) {
					if p == c[0] {
						t.Fatalf("%d handed out twice", p)
					}
				}
				if rel := Candidates(Release(took, c[0])); rel[len(rel)-1] != c[0] {
					t.Fatalf("just released %d is not last: %v", c[0], rel)
				}
			}
			if depth == 4 {
				return
			}
			for _, o := range all {
				walk(apply(s, o), depth+1)
			}
		}
		walk(NewState(r), 0)
	}
}

// SVC-24, as a property over larger ranges and longer histories.
func TestSVC24CandidatesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		low := rapid.IntRange(1024, 65000).Draw(t, "low")
		r := Range{low, low + rapid.IntRange(0, 40).Draw(t, "span")}
		s := NewState(r)
		n := rapid.IntRange(0, 80).Draw(t, "ops")
		for i := 0; i < n; i++ {
			o := op{kind: rapid.IntRange(0, 2).Draw(t, "kind"), port: rapid.IntRange(r.Low-2, r.High+2).Draw(t, "port")}
			before := s
			s = apply(s, o)
			if o.kind == 0 && len(Candidates(before)) > 0 && s.Last != Candidates(before)[0] {
				t.Fatalf("take did not record the newest port")
			}
			check(t, s)
		}
	})
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
