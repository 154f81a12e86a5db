package inject

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/engenho/engenho/drivers/clock"
)

// JumpClock is the chaos build's clock: its wall time can jump, forward or
// back, as a node's does when NTP steps it or an operator sets it, while
// its monotonic time runs on untouched, as the kernel's does (the fault
// kind clock.jump). Code that measures durations and deadlines must not
// see the jump (Go compares two times by their monotonic readings when
// both have one); code that writes instants down (the journal, the lease
// record, due times) sees it, as it would on a real node.
type JumpClock struct {
	base   clock.Clock
	offset atomic.Int64 // nanoseconds added to the wall time
}

var _ clock.Clock = (*JumpClock)(nil)

// NewJumpClock returns a clock on base with no jump yet.
func NewJumpClock(base clock.Clock) *JumpClock { return &JumpClock{base: base} }

// Jump moves the wall time by d (negative: back); the monotonic time does
// not move.
func (j *JumpClock) Jump(d time.Duration) { j.offset.Add(int64(d)) }

// Reset undoes every jump.
func (j *JumpClock) Reset() { j.offset.Store(0) }

// Offset is how far the wall time is from the base clock's.
func (j *JumpClock) Offset() time.Duration { return time.Duration(j.offset.Load()) }

func (j *JumpClock) Now() time.Time {
	t := j.base.Now()
	if off := j.Offset(); off != 0 {
		return shiftWall(t, off)
	}
	return t
}

func (j *JumpClock) Since(t time.Time) time.Duration { return j.Now().Sub(t) }

// AfterFunc and NewTimer wait durations, which no wall jump changes.
func (j *JumpClock) AfterFunc(d time.Duration, f func()) clock.Timer { return j.base.AfterFunc(d, f) }
func (j *JumpClock) NewTimer(d time.Duration) clock.Timer            { return j.base.NewTimer(d) }

// timeLayout mirrors time.Time's fields: the wall clock (with the
// has-monotonic flag) and ext, the monotonic reading when that flag is
// set. TestShiftWallKeepsMonotonic checks the mirror still holds.
type timeLayout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

// shiftWall returns t with its wall time moved by d and its monotonic
// reading, if it has one, unchanged. time.Time.Add moves both; there is
// no API for the wall alone, so the monotonic reading is put back by hand.
func shiftWall(t time.Time, d time.Duration) time.Time {
	u := t.Add(d)
	if t == t.Round(0) || u == u.Round(0) {
		return u // no monotonic reading to keep (or Add had to drop it)
	}
	(*timeLayout)(unsafe.Pointer(&u)).ext = (*timeLayout)(unsafe.Pointer(&t)).ext
	return u
}
