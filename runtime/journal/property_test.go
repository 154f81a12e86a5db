package journal

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
)

// eventModel is what the event log must contain: the retained tail, each
// event with the sequence number it was given.
type eventModel struct {
	last     uint64
	kept     []messages.Event // Seq, Message, UnixMs
	maxCount int              // <= 0: no count bound
	maxAge   time.Duration    // <= 0: no age bound
}

func (m *eventModel) appended(msgs []string, unixMs int64) {
	for _, msg := range msgs {
		m.last++
		m.kept = append(m.kept, messages.Event{Seq: m.last, Message: msg, UnixMs: unixMs})
	}
}

func (m *eventModel) prune(now time.Time) int {
	var countCut uint64
	if m.maxCount > 0 && m.last > uint64(m.maxCount) {
		countCut = m.last - uint64(m.maxCount)
	}
	ageCut := now.Add(-m.maxAge).UnixMilli()
	n := 0
	for n < len(m.kept) {
		e := m.kept[n]
		if e.Seq > countCut && (m.maxAge <= 0 || e.UnixMs >= ageCut) {
			break
		}
		n++
	}
	m.kept = m.kept[n:]
	return n
}

func (m *eventModel) after(seq uint64, limit int) []messages.Event {
	var out []messages.Event
	for _, e := range m.kept {
		if e.Seq > seq && len(out) < limit {
			out = append(out, e)
		}
	}
	return out
}

// memDir is a temporary directory on tmpfs when /dev/shm exists: the
// property reopens badger hundreds of times, and on a disk each open and
// close costs several fsyncs. Durability is not what it checks.
func memDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "journal-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// SVC-20, DMN-10: random appends (single, batched, emitted), restarts and
// retention passes keep sequence numbers growing by one with no reuse;
// reads after N return exactly the expected tail. NoSync: durability is
// proven by crash_test.go; this property is about numbering.
func TestEventSequenceProperty(t *testing.T) {
	base := memDir(t)
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(base, "p")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		clk := clock.NewFake(epoch)
		m := &eventModel{
			maxCount: rapid.IntRange(-1, 25).Draw(rt, "maxEvents"),
			maxAge:   rapid.SampledFrom([]time.Duration{-1, time.Minute, time.Hour}).Draw(rt, "maxAge"),
		}
		opts := Options{Dir: dir, Clock: clk, NoSync: true, GCInterval: -1, small: true,
			Retention: Retention{MaxEvents: m.maxCount, MaxAge: m.maxAge, Interval: -1}}
		if m.maxCount == 0 {
			opts.Retention.MaxEvents = -1 // 0 would mean the default
		}
		j, err := Open(opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = j.Close() }()
		nextMsg, restarts := 0, 0
		draw := func(rt *rapid.T, n int) []messages.Event {
			evs := make([]messages.Event, n)
			msgs := make([]string, n)
			for i := range evs {
				nextMsg++
				msgs[i] = fmt.Sprintf("m%d", nextMsg)
				evs[i] = messages.Event{Kind: "test.prop", Message: msgs[i]}
			}
			return evs
		}
		msgsOf := func(evs []messages.Event) []string {
			var out []string
			for _, e := range evs {
				out = append(out, e.Message)
			}
			return out
		}
		appendAndCheck := func(rt *rapid.T, evs []messages.Event) {
			last, err := j.Append(evs...)
			if err != nil {
				rt.Fatal(err)
			}
			m.appended(msgsOf(evs), clk.Now().UnixMilli())
			if last != m.last {
				rt.Fatalf("append returned %d, want %d", last, m.last)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) { appendAndCheck(rt, draw(rt, 1)) },
			"batch": func(rt *rapid.T) {
				appendAndCheck(rt, draw(rt, rapid.IntRange(0, 40).Draw(rt, "n")))
			},
			"emit": func(rt *rapid.T) {
				evs := draw(rt, rapid.IntRange(1, 5).Draw(rt, "n"))
				for _, e := range evs {
					if err := j.Emit(e); err != nil {
						rt.Fatal(err)
					}
				}
				if _, err := j.Append(); err != nil { // barrier
					rt.Fatal(err)
				}
				m.appended(msgsOf(evs), clk.Now().UnixMilli())
			},
			"restart": func(rt *rapid.T) {
				if restarts == 2 { // reopening badger is the slow part
					rt.Skip("enough restarts in this run")
				}
				restarts++
				if err := j.Close(); err != nil {
					rt.Fatal(err)
				}
				if j, err = Open(opts); err != nil {
					rt.Fatal(err)
				}
			},
			"prune": func(rt *rapid.T) {
				res, err := j.PruneEvents()
				if err != nil {
					rt.Fatal(err)
				}
				if want := m.prune(clk.Now()); res.Removed != want {
					rt.Fatalf("prune removed %d, model %d", res.Removed, want)
				}
			},
			"advance": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.SampledFrom([]int{1, 30, 90, 3000, 7200}).Draw(rt, "seconds")) * time.Second)
			},
			"": func(rt *rapid.T) {
				if j.LastSeq() != m.last {
					rt.Fatalf("last seq %d, model %d", j.LastSeq(), m.last)
				}
				after := uint64(rapid.IntRange(0, int(m.last)+2).Draw(rt, "after"))
				limit := rapid.IntRange(1, 50).Draw(rt, "limit")
				got, err := j.EventsAfter(after, limit)
				if err != nil {
					rt.Fatal(err)
				}
				want := m.after(after, limit)
				same := slices.EqualFunc(got, want, func(a, b messages.Event) bool {
					return a.Seq == b.Seq && a.Message == b.Message && a.UnixMs == b.UnixMs
				})
				if !same {
					rt.Fatalf("after %d limit %d:\n got %v\nwant %v", after, limit, seqs(got), seqs(want))
				}
			},
		})
	})
}
