package journal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

func evt(msg string) messages.Event {
	return messages.Event{Kind: messages.KindReplicaRestarted, Stack: "web", Service: "api", Message: msg}
}

func seqs(evs []messages.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// SVC-20: sequence numbers grow by one, across batches and reopens; the
// journal stamps time and level.
func TestAppendSeqGrowsByOneAcrossReopen(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), nil)
	if last := must(j.Append(evt("a"))); last != 1 {
		t.Fatalf("first seq %d", last)
	}
	if last := must(j.Append(evt("b"), evt("c"), evt("d"))); last != 4 {
		t.Fatalf("batch last %d", last)
	}
	j = reopen(t, j)
	if j.LastSeq() != 4 {
		t.Fatalf("last after reopen %d", j.LastSeq())
	}
	if last := must(j.Append(evt("e"))); last != 5 {
		t.Fatalf("after reopen %d", last)
	}
	all := must(j.EventsAfter(0, 0))
	if !slices.Equal(seqs(all), span(1, 5)) {
		t.Fatalf("seqs %v", seqs(all))
	}
	if all[3].Message != "d" || all[0].Level != messages.LevelInfo || all[0].UnixMs != clk.Now().UnixMilli() {
		t.Fatalf("event %+v", all[0])
	}
	if got := must(j.EventsAfter(2, 2)); !slices.Equal(seqs(got), []uint64{3, 4}) {
		t.Fatalf("after 2 limit 2: %v", seqs(got))
	}
	if got := must(j.EventsAfter(5, 10)); len(got) != 0 {
		t.Fatalf("after last: %v", seqs(got))
	}
}

// SVC-20: concurrent appends (single and batched) and emits share commits
// but never share or skip a number.
func TestConcurrentAppendsGetUniqueGapFreeSeqs(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []uint64
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				n := 1 + (w+i)%4
				batch := make([]messages.Event, n)
				for k := range batch {
					batch[k] = evt(fmt.Sprintf("w%d-%d-%d", w, i, k))
				}
				if w == 0 {
					for _, e := range batch {
						if err := j.Emit(e); err != nil {
							t.Error(err)
						}
					}
					continue
				}
				last, err := j.Append(batch...)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, span(last-uint64(n)+1, last)...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	last := must(j.Append()) // barrier: the emits are committed
	all := must(j.EventsAfter(0, 10_000))
	if !slices.Equal(seqs(all), span(1, last)) {
		t.Fatalf("log is not 1..%d: %v", last, seqs(all))
	}
	slices.Sort(got)
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Fatal("a sequence number was returned twice")
	}
	emitted := 0
	for _, e := range all {
		if strings.HasPrefix(e.Message, "w0-") {
			emitted++
		}
	}
	if int(last)-len(got) != emitted || emitted == 0 {
		t.Fatalf("appended %d + emitted %d != %d", len(got), emitted, last)
	}
}

func TestInvalidEventsAreRefusedWhole(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	bad := []messages.Event{
		{Message: "no kind"},
		{Kind: "x", Level: "fatal"},
		{Kind: "x", Message: strings.Repeat("m", MaxEventBytes)},
	}
	for _, b := range bad {
		if _, err := j.Append(evt("ok"), b); !errors.Is(err, ErrInvalid) {
			t.Errorf("append %+v: %v", b.Kind, err)
		}
		if err := j.Emit(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("emit %+v: %v", b.Kind, err)
		}
	}
	if j.LastSeq() != 0 {
		t.Fatalf("a refused batch was partly appended: last %d", j.LastSeq())
	}
}

// A batch bigger than one badger transaction is committed in several and
// still numbered without a gap, whatever the memtable size.
func TestHugeBatchSplitsAcrossTransactions(t *testing.T) {
	for _, small := range []bool{false, true} {
		t.Run(fmt.Sprintf("small=%v", small), func(t *testing.T) {
			j, _ := openTest(t, t.TempDir(), func(o *Options) { o.NoSync, o.small = true, small })
			batch := make([]messages.Event, 3000)
			for i := range batch {
				batch[i] = evt(strings.Repeat("x", 1000))
			}
			batch[5].Message = strings.Repeat("\x00", MaxEventBytes-100) // escapes to 6x its size
			last := must(j.Append(batch...))
			if last != 3000 {
				t.Fatalf("last %d", last)
			}
			n, prev := 0, uint64(0)
			for prev < last {
				for _, e := range must(j.EventsAfter(prev, 5000)) {
					if e.Seq != prev+1 {
						t.Fatalf("gap after %d: %d", prev, e.Seq)
					}
					prev = e.Seq
					n++
				}
			}
			if n != 3000 {
				t.Fatalf("read %d", n)
			}
		})
	}
}

// DMN-10: retention by count keeps the newest MaxEvents.
func TestRetentionByCount(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), func(o *Options) { o.Retention = Retention{MaxEvents: 10, MaxAge: -1, Interval: -1} })
	for i := 0; i < 5; i++ {
		must(j.Append(evt("a"), evt("b"), evt("c"), evt("d"), evt("e")))
	}
	res := must(j.PruneEvents())
	if res.Removed != 15 || res.FirstSeq != 16 {
		t.Fatalf("prune: %+v", res)
	}
	if got := must(j.EventsAfter(0, 0)); !slices.Equal(seqs(got), span(16, 25)) {
		t.Fatalf("kept %v", seqs(got))
	}
	if res := must(j.PruneEvents()); res.Removed != 0 {
		t.Fatalf("second pass removed %d", res.Removed)
	}
}

// DMN-10, SVC-20: retention by age removes events older than MaxAge; when
// it empties the log the sequence still continues after a reopen.
func TestRetentionByAgeKeepsSequence(t *testing.T) {
	dir := t.TempDir()
	ret := Retention{MaxEvents: -1, MaxAge: time.Hour, Interval: -1}
	j, clk := openTest(t, dir, func(o *Options) { o.Retention = ret })
	must(j.Append(evt("old1"), evt("old2")))
	clk.Advance(40 * time.Minute)
	must(j.Append(evt("young")))
	clk.Advance(30 * time.Minute) // old ones are 70m old, young one 30m
	res := must(j.PruneEvents())
	if res.Removed != 2 || res.FirstSeq != 3 {
		t.Fatalf("prune: %+v", res)
	}
	clk.Advance(time.Hour)
	if res := must(j.PruneEvents()); res.Removed != 1 || res.FirstSeq != 0 {
		t.Fatalf("prune all: %+v", res)
	}
	noErr(t, j.Close())
	j2, _ := openTest(t, dir, func(o *Options) { o.Retention = ret })
	if j2.LastSeq() != 3 {
		t.Fatalf("last seq after emptying and reopening: %d", j2.LastSeq())
	}
	if last := must(j2.Append(evt("next"))); last != 4 {
		t.Fatalf("next seq %d, want 4", last)
	}
}

// DMN-10: the retention pass runs in the background on the journal's
// clock.
func TestBackgroundRetentionRunsOnClock(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), func(o *Options) {
		o.Retention = Retention{MaxEvents: 3, MaxAge: -1, Interval: time.Minute}
		o.GCInterval = -1
	})
	must(j.Append(evt("1"), evt("2"), evt("3"), evt("4"), evt("5")))
	if !clk.WaitForTimers(1, 10*time.Second) {
		t.Fatal("retention timer never armed")
	}
	clk.Advance(time.Minute)
	waitFor(t, "background prune", func() bool { return j.Stats().EventsPruned == 2 })
	if first := must(j.FirstSeq()); first != 3 {
		t.Fatalf("first %d", first)
	}
}

// DMN-10: value-log GC runs in the background on the journal's clock and
// stops with Close (goleak in TestMain).
func TestValueLogGCRunsOnClock(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), func(o *Options) {
		o.GCInterval = 5 * time.Minute
		o.Retention.Interval = -1
	})
	for i := 0; i < 3; i++ {
		if !clk.WaitForTimers(1, 10*time.Second) {
			t.Fatal("gc timer never armed")
		}
		clk.Advance(5 * time.Minute)
		waitFor(t, "gc pass", func() bool { return j.Stats().GCPasses == uint64(i+1) })
	}
}

// waitFor polls a condition set by a background goroutine (not a timing
// assertion: the limit only bounds a hang).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func recv(t *testing.T, s *Subscription) messages.Event {
	t.Helper()
	select {
	case e, ok := <-s.Events():
		if !ok {
			t.Fatalf("subscription ended: %v", s.Err())
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return messages.Event{}
}

// SVC-20: `events -f` follows from a point: the backlog first, then new
// events as they commit, in order.
func TestSubscribeDeliversBacklogThenLive(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	must(j.Append(evt("1"), evt("2"), evt("3")))
	s := j.Subscribe(1)
	defer s.Close()
	for _, want := range []uint64{2, 3} {
		if e := recv(t, s); e.Seq != want {
			t.Fatalf("backlog: got %d want %d", e.Seq, want)
		}
	}
	must(j.Append(evt("4")))
	noErr(t, j.Emit(evt("5")))
	for _, want := range []uint64{4, 5} {
		if e := recv(t, s); e.Seq != want {
			t.Fatalf("live: got %d want %d", e.Seq, want)
		}
	}
	s.Close()
	if _, ok := <-s.Events(); ok {
		t.Fatal("channel open after Close")
	}
	if s.Err() != nil {
		t.Fatalf("err after Close: %v", s.Err())
	}
}

// A subscriber that does not read never holds up appends, and still gets
// every event in order once it reads.
func TestSlowSubscriberDoesNotBlockAppends(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), func(o *Options) { o.NoSync = true })
	s := j.Subscribe(0)
	defer s.Close()
	for i := 0; i < 20; i++ {
		batch := make([]messages.Event, 100)
		for k := range batch {
			batch[k] = evt("x")
		}
		must(j.Append(batch...))
	}
	for want := uint64(1); want <= 2000; want++ {
		if e := recv(t, s); e.Seq != want {
			t.Fatalf("got %d want %d", e.Seq, want)
		}
	}
}

func TestSubscriptionEndsWhenJournalCloses(t *testing.T) {
	j, err := Open(Options{Dir: t.TempDir()})
	noErr(t, err)
	s := j.Subscribe(0)
	idle := j.Subscribe(0)
	must(j.Append(evt("1"), evt("2")))
	recv(t, s) // s now has an undelivered event pending or buffered
	noErr(t, j.Close())
	for range s.Events() {
	}
	if !errors.Is(s.Err(), ErrClosed) || !errors.Is(idle.Err(), ErrClosed) {
		t.Fatalf("errs %v %v", s.Err(), idle.Err())
	}
}
