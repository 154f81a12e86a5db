package messages

// Fail-closed recovery (issue 17; SVC-30..SVC-33 in docs/rules.md).

// Event kinds of fail-closed recovery.
const (
	// KindPublicationInhibited: a withdrawal from the balancer could not be
	// applied; no instance of the service is published until one is
	// (SVC-30).
	KindPublicationInhibited = "publication.inhibited"
	// KindPublicationRestored: a withdrawal succeeded again; the service
	// publishes again (SVC-30).
	KindPublicationRestored = "publication.restored"
	// KindRecoveryStale: the instance changed between its ready probe and
	// its publication; not published, verified again (SVC-31).
	KindRecoveryStale = "recovery.stale"
	// KindRecoveryRefused: the instance is in a state recovery does not
	// act on (paused, unknown, none); it is neither restarted nor deleted
	// (SVC-32).
	KindRecoveryRefused = "recovery.refused"
	// KindRetirementPending: an instance that must be retired could not be
	// (a driver error); recorded in the journal and retried (SVC-33).
	KindRetirementPending = "retirement.pending"
)

// ReplicaWithdrawn is the service's answer to a replica that asked to be
// withdrawn before its instance is touched (ReplicaStatus.Withdraw,
// SVC-30). OK is false when the balancer refused the withdrawal: the
// service is then publication-inhibited.
type ReplicaWithdrawn struct {
	OK bool
}
