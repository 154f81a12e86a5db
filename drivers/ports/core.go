package ports

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Range is an inclusive range of TCP ports, LOW-HIGH.
type Range struct{ Low, High int }

// DefaultRange is the range used when the configuration names none.
var DefaultRange = Range{Low: 20000, High: 20999}

// RangeForm is the expected form of a range, for error messages.
const RangeForm = "LOW-HIGH, 1024 <= LOW <= HIGH <= 65535"

// ErrBadRange is the kind of a range that does not parse or is out of
// bounds.
var ErrBadRange = errors.New("bad port range")

// String is the range as LOW-HIGH.
func (r Range) String() string { return strconv.Itoa(r.Low) + "-" + strconv.Itoa(r.High) }

// Size is the number of ports in the range.
func (r Range) Size() int { return r.High - r.Low + 1 }

// Contains says whether p is in the range.
func (r Range) Contains(p int) bool { return p >= r.Low && p <= r.High }

// ParseRange reads "LOW-HIGH" with 1024 <= LOW <= HIGH <= 65535 (ports below
// 1024 are privileged; a range is never empty).
func ParseRange(s string) (Range, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return Range{}, fmt.Errorf("%w %q: want %s", ErrBadRange, s, RangeForm)
	}
	l, errL := strconv.Atoi(strings.TrimSpace(lo))
	h, errH := strconv.Atoi(strings.TrimSpace(hi))
	if errL != nil || errH != nil || l < 1024 || h > 65535 || l > h {
		return Range{}, fmt.Errorf("%w %q: want %s", ErrBadRange, s, RangeForm)
	}
	return Range{Low: l, High: h}, nil
}

// State is the allocator's state: the range, the port handed out last (0:
// none yet), whether any was handed out, and the ports in use (handed out
// or adopted, not released).
type State struct {
	Range  Range
	Last   int
	Handed bool
	InUse  map[int]bool
}

// NewState is the state of a fresh allocator over r.
func NewState(r Range) State { return State{Range: r, InUse: map[int]bool{}} }

// Candidates lists the ports to try, in order: those after Last up to High,
// then from Low up to Last, leaving out the ports in use. With no Last yet
// the walk starts at Low.
func Candidates(s State) []int {
	out := make([]int, 0, s.Range.Size())
	start := s.Range.Low
	if s.Range.Contains(s.Last) {
		start = s.Last + 1
	}
	for i := 0; i < s.Range.Size(); i++ {
		p := s.Range.Low + (start-s.Range.Low+i)%s.Range.Size()
		if !s.InUse[p] {
			out = append(out, p)
		}
	}
	return out
}

// Take records p as handed out: it is in use and the newest port.
func Take(s State, p int) State {
	s.InUse = with(s.InUse, p, true)
	s.Last, s.Handed = p, true
	return s
}

// Adopt records p, held by an instance that already exists (adopted after
// a daemon restart), as in use. Before anything is handed out, the highest
// adopted port in the range becomes Last, so the walk starts after the
// newest port in use.
func Adopt(s State, p int) State {
	s.InUse = with(s.InUse, p, true)
	if s.Range.Contains(p) && !s.Handed && p > s.Last {
		s.Last = p
	}
	return s
}

// Release records p as free again. Last stays: the next walk starts after
// it, so p is not handed out again at once.
func Release(s State, p int) State {
	s.InUse = with(s.InUse, p, false)
	return s
}

// with is a copy of m with p set to in (deleted when false): the core never
// changes the map a caller holds.
func with(m map[int]bool, p int, in bool) map[int]bool {
	out := make(map[int]bool, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	if in {
		out[p] = true
	} else {
		delete(out, p)
	}
	return out
}
