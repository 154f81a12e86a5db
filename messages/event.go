package messages

// Event is one entry of the node's event log (spec SVC-20). Seq is assigned
// by the journal when the event is appended and grows by one across daemon
// restarts.
type Event struct {
	Seq      uint64 `json:"seq"`
	UnixMs   int64  `json:"unix_ms"`
	Level    Level  `json:"level"`
	Kind     string `json:"kind"`
	Stack    string `json:"stack,omitempty"`
	Service  string `json:"service,omitempty"`
	Instance string `json:"instance,omitempty"`
	Host     string `json:"host,omitempty"`
	Actor    string `json:"actor,omitempty"`
	// By is who caused the event, when an operator's request did: "uid 0
	// (root)" (issue 17, deploy audit). Empty in records written before.
	By      string            `json:"by,omitempty"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
	// Fingerprint is set on an event that states what its subject is
	// (left down, rolled back, a stack serving or failed) rather than an
	// action: the same fingerprint again for the same subject is not
	// announced twice (SVC-26).
	Fingerprint string `json:"fingerprint,omitempty"`
}

// Level is an event's severity.
type Level string

const (
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"
	LevelError Level = "error"
)

// Event kinds. The dotted prefix names the domain; docs/services.md says
// when each replica kind is raised.
const (
	KindDeploySucceeded   = "deploy.succeeded"
	KindDeployFailed      = "deploy.failed"
	KindRolloutStarted    = "rollout.started"
	KindRolloutPaused     = "rollout.paused"
	KindRolloutRolledBack = "rollout.rolled_back"
	KindRolloutSuperseded = "rollout.superseded"
	KindHealthUnhealthy   = "health.unhealthy"
	KindHealthRecovered   = "health.recovered"
	KindReplicaFailed     = "replica.failed"
	KindReplicaRestarted  = "replica.restarted"
	KindReplicaReplaced   = "replica.replaced"
	KindReplicaLimit      = "replica.restart_limit"
	KindActorRestarted    = "actor.restarted"
	KindActorEscalated    = "actor.escalated"
	KindServiceStopped    = "service.stopped"
	KindServiceStarted    = "service.started"
	KindStackRemoved      = "stack.removed"
	KindHostWoke          = "host.woke"
	KindHostSlept         = "host.slept"
	KindHostState         = "host.state"
	KindHostWakeFailed    = "host.wake_failed"
	KindLeaseLost         = "lease.lost"
	KindSidecarRestarted  = "sidecar.restarted"
	KindDaemonBooted      = "daemon.booted"
	KindDaemonCrashed     = "daemon.crashed"
	KindDaemonState       = "daemon.state"
	KindDaemonBootFailed  = "daemon.boot_failed"
	KindJournalDamaged    = "journal.damaged"
	KindJournalReinit     = "journal.reinit"
	// KindEventsDropped: events were not recorded while the data
	// directory's disk was short of the journal's reserve.
	KindEventsDropped  = "journal.events_dropped"
	KindConfigReloaded = "config.reloaded"
	KindConfigRejected = "config.rejected"
	// An operator's command now holds a value the stack file declares,
	// or no longer does (SVC-23).
	KindOverrideSet     = "override.set"
	KindOverrideDropped = "override.dropped"
	// A stack's phase changed (SVC-26): every service converged, or one
	// failing, backing off or paused. Announced once per change.
	KindStackServing = "stack.serving"
	KindStackFailed  = "stack.failed"
	// A `file:` secret's file changed; Fields name the secret and the
	// service's on_change, never the value (issue 15).
	KindSecretRotated = "secret.rotated"
)
