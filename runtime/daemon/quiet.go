package daemon

import (
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/runtime/journal"
)

// quietSeed bounds how many of the last events seed the quiet filter at
// boot (SVC-26): enough for every subject's last state on a busy node;
// a subject last heard of further back may be announced once more.
const quietSeed = 20000

// quietEvents puts the quiet filter (SVC-26) in front of the tree's event
// sink, seeded from the event log, so a reconcile pass after a restart
// (every instance adopted again, every rollout state derived again) finds
// what the previous run announced and says nothing of it.
func (d *Daemon) quietEvents(j *journal.Journal, sink supervise.Emitter) *supervise.Quiet {
	q := supervise.NewQuiet(sink)
	last := j.LastSeq()
	after := uint64(0)
	if last > quietSeed {
		after = last - quietSeed
	}
	for after < last {
		evs, err := j.EventsAfter(after, journal.DefaultReadLimit)
		if err != nil {
			d.log.Warn().Err(err).Msg("reading the event log for the quiet filter; some states may be announced again")
			break
		}
		if len(evs) == 0 {
			break
		}
		q.Seed(evs)
		after = evs[len(evs)-1].Seq
	}
	return q
}
