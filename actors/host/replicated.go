package host

import (
	"github.com/engenho/engenho/configs/stackfile"
)

// replicationClass is the class shown in status: the configured one, or
// the default (batched) for a hibernating host; none for a plain worker.
func (a *Actor) replicationClass() string {
	if !a.cfg.Hibernating {
		return ""
	}
	if a.cfg.Replication == "" {
		return stackfile.ReplicationBatched
	}
	return a.cfg.Replication
}

// noteReplicated records what the store is known to hold after a restore
// or a checkpoint (ACT-17), for status and its loss window. A wake starts
// afresh: a restored tree (or a first boot's empty one) is in sync with
// the store from the moment the restore began; a warm local copy reused
// as it is may hold writes never shipped, so it is in sync only after its
// first checkpoint.
func (a *Actor) noteReplicated(op Op, outcome string, r *result) {
	switch op {
	case OpRestore:
		a.replicated = a.replicated.Reset()
		if (outcome == OK && r.hasSig) || outcome == FirstBoot {
			a.replicated.Synced = r.scanAt
		}
	case OpCheckpoint, SideCheckpoint:
		switch outcome {
		case OK:
			a.replicated.Synced, a.replicated.LastShipped, a.replicated.LastShippedBytes = r.scanAt, r.scanAt, r.stats.Bytes
		case Unchanged:
			a.replicated.Synced = r.scanAt
		}
	}
}
