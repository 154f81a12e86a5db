package journal

import (
	"errors"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/engenho/engenho/drivers/clock"
)

// maintain runs the background value-log GC, event retention and
// compaction (compact.go) on timers from the journal's clock, until Close.
func (j *Journal) maintain() {
	defer j.bg.Done()
	gc := j.timer(j.opts.GCInterval)
	ret := j.timer(j.opts.Retention.Interval)
	var compact clock.Timer // armed only after a write
	defer func() { stopTimer(gc); stopTimer(ret); stopTimer(compact) }()
	for {
		select {
		case <-j.closing:
			return
		case <-j.compact.kick:
			if compact == nil {
				compact = j.compact.clk.NewTimer(compactDelay)
			}
		case <-timerC(compact):
			compact = nil
			j.compactPass()
		case <-timerC(gc):
			j.runGC()
			gc = j.timer(j.opts.GCInterval)
		case <-timerC(ret):
			if _, err := j.events.requestPrune(); err != nil {
				j.log.Warn().Err(err).Msg("event retention pass failed")
			}
			ret = j.timer(j.opts.Retention.Interval)
		}
	}
}

// timer returns nil for a disabled (negative) interval.
func (j *Journal) timer(d time.Duration) clock.Timer {
	if d < 0 {
		return nil
	}
	return j.opts.Clock.NewTimer(d)
}

func timerC(t clock.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}

func stopTimer(t clock.Timer) {
	if t != nil {
		t.Stop()
	}
}

// runGC rewrites value-log files while badger finds one worth rewriting.
func (j *Journal) runGC() {
	defer j.stats.gcPasses.Add(1)
	if j.space.check() != nil {
		return // a rewrite writes too; the next pass tries again
	}
	for {
		select {
		case <-j.closing:
			return
		default:
		}
		err := j.db.RunValueLogGC(j.opts.GCDiscardRatio)
		switch {
		case err == nil:
			j.stats.gcRewrites.Add(1)
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			return
		default:
			j.log.Warn().Err(err).Msg("value log GC failed")
			return
		}
	}
}
