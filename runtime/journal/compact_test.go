package journal

import (
	"fmt"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

// PERF-3, PERF-6, REL-3: with no compactor of badger's own, the journal
// compacts a level 0 that is over its target after writes, and every
// event written is still there, before and after a reopen.
func TestPERF3JournalCompactsAfterWrites(t *testing.T) {
	dir := t.TempDir()
	opts := func(o *Options) { o.small, o.l0Tables, o.NoSync = true, 2, true }
	j, _ := openTest(t, dir, opts)
	msg := fmt.Sprintf("%0400d", 0)
	written := 0
	// 2 MiB memtables: write until level 0 has held two flushed tables.
	for seen := 0; seen < 2 && j.Stats().Compactions == 0 && written < 200_000; {
		batch := make([]messages.Event, 500)
		for i := range batch {
			batch[i] = messages.Event{Kind: "test.fill", Message: msg}
		}
		_, err := j.Append(batch...)
		noErr(t, err)
		written += len(batch)
		seen = max(seen, j.db.Levels()[0].NumTables)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for j.Stats().Compactions == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if j.Stats().Compactions == 0 {
		t.Fatalf("level 0 never compacted: %s", j.db.LevelsToString())
	}
	check := func(j *Journal) {
		t.Helper()
		evs, err := j.EventsAfter(0, written+1)
		noErr(t, err)
		if len(evs) != written || evs[len(evs)-1].Seq != uint64(written) {
			t.Fatalf("read back %d events, want %d", len(evs), written)
		}
	}
	check(j)
	noErr(t, j.Close())
	j2, _ := openTest(t, dir, opts)
	check(j2)
}

// PERF-3: a journal nobody writes to runs no compaction pass after the
// one at open (which compacts what the previous process left).
func TestPERF3IdleJournalArmsNoTimer(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	deadline := time.Now().Add(time.Minute)
	for j.compact.passes.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := j.compact.passes.Load(); got != 1 {
		t.Fatalf("passes after open = %d, want 1", got)
	}
	time.Sleep(4 * compactDelay)
	if got := j.compact.passes.Load(); got != 1 {
		t.Fatalf("an idle journal ran %d passes, want 1 (the one at open)", got)
	}
	_, err := j.Append(messages.Event{Kind: "test.one"})
	noErr(t, err)
	deadline = time.Now().Add(time.Minute)
	for j.compact.passes.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := j.compact.passes.Load(); got != 2 {
		t.Fatalf("passes after one write = %d, want 2", got)
	}
}
