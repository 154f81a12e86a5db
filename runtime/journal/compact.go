package journal

import (
	"sync/atomic"
	"time"

	"github.com/engenho/engenho/drivers/clock"
)

// Compaction (PERF-3, issue 19). Badger's own compactors each wake every
// 50ms to score the levels, written or not: with two of them, 40 wake-ups
// a second and most of an idle daemon's CPU. Badger takes zero compactors
// or at least two, so the journal runs none (NumCompactors(0)) and drives
// compaction itself, only after writes:
//
//   - every write (an intent, an event commit, a retention delete) marks
//     the journal dirty; the first mark since the last pass arms one timer,
//     compactDelay away on the wall clock (not Options.Clock: a test on a
//     fake clock that never moves would otherwise stall its writes at 15
//     level-0 tables; nothing a test observes depends on when a
//     compaction runs);
//   - the pass reads badger's level scores (DB.Levels) and, when a level is
//     over its target (level 0: NumLevelZeroTables flushed memtables, 5),
//     calls DB.Flatten, which compacts level 0 into the base level and any
//     level over its size downwards: the compactions badger's compactors
//     would have picked, a quarter of a second later;
//   - a journal nobody writes to arms no timer at all.
//
// Level 0 grows only by memtable flushes, one per MemTableSize (16 MiB) of
// writes, and badger stalls writes at NumLevelZeroTablesStall (15) tables,
// 10 flushes past the point where a pass compacts. Measured at 200,000-
// 280,000 synced events a second (BenchmarkPERF6Compaction), level 0
// peaked at 6-8 tables, against 5-6 with badger's compactors, at the same
// throughput.
// Nothing is lost either way: a compaction moves records that are already
// in the write-ahead log. (A variable for the benchmark.)
var compactDelay = 250 * time.Millisecond

// compactor is the write-driven compaction timer's state.
type compactor struct {
	clk    clock.Clock
	dirty  atomic.Bool
	kick   chan struct{} // one pending wake-up of maintain
	passes atomic.Uint64 // passes run, for tests
}

func newCompactor() *compactor {
	return &compactor{clk: clock.New(), kick: make(chan struct{}, 1)}
}

// wrote marks a write: the first since the last pass wakes maintain,
// which arms the compaction timer. Called before the write, so a write
// that badger stalls on a full level 0 has already asked for the pass that
// unblocks it.
func (c *compactor) wrote() {
	if c.dirty.Load() || c.dirty.Swap(true) {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// compactPass compacts when a level is over its target; it reports
// whether it ran a compaction.
func (j *Journal) compactPass() bool {
	j.compact.dirty.Store(false) // writes from now on arm the next pass
	j.compact.passes.Add(1)
	if j.opts.nativeCompactors > 0 {
		return false
	}
	over := false
	for _, l := range j.db.Levels() {
		if l.Score >= 1 {
			over = true
			break
		}
	}
	if !over {
		return false
	}
	start := time.Now()
	if err := j.db.Flatten(1); err != nil {
		j.log.Warn().Err(err).Msg("journal compaction failed; retried after the next write")
		return false
	}
	j.stats.compactions.Add(1)
	j.log.Debug().Dur("took", time.Since(start)).Msg("journal compacted")
	return true
}
