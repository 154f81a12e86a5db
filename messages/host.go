package messages

import (
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
)

// SidecarHeader marks a request from a host's own sidecar (ACT-7): the
// edge neither counts it as activity nor wakes a sleeping host for it, and
// drops the header before proxying.
const SidecarHeader = "X-Engenho-Sidecar"

// DefaultWakeTimeout bounds a request's wait at the edge for a host to wake
// (ACT-3).
const DefaultWakeTimeout = 30 * time.Second

// HostDefinition hands the activator a service it runs instead of a
// service actor: a hibernating service (a host, ACT-1..ACT-13) or a
// standalone worker (sidecars with no instance, ACT-12). The stack sends it
// through the root on every deployment.
type HostDefinition struct {
	Stack      string
	Service    string
	Deployment string
	Revision   string
	Definition stackfile.Service
	// Stopped is the service's durable stopped intent (SVC-10).
	Stopped bool
}

// HostRemove tells the activator a host's service is gone from its stack.
type HostRemove struct {
	Stack   string
	Service string
}

// HostState is a host's state (ACT-2).
type HostState string

const (
	HostAsleep   HostState = "asleep"
	HostWaking   HostState = "waking"
	HostAwake    HostState = "awake"
	HostStopping HostState = "stopping"
	// HostRestarting: the host's actor ended and waits out its
	// supervisor's backoff; NextAttempt says when it starts again (SUP-21).
	HostRestarting HostState = "restarting"
)

// Event kinds of the host domain besides those in event.go.
const (
	// KindHostStoodDown: an awake or waking host stopped its instance and
	// sidecars because its lease was lost or its instance died (ACT-6).
	KindHostStoodDown = "host.stood_down"
	// KindHostCheckpoint: a checkpoint failed (it is retried).
	KindHostCheckpoint = "host.checkpoint_failed"
	// KindHostStopPending: a stop could not be proven; the lease stays held
	// and the sweep retries it (ACT-8).
	KindHostStopPending = "host.stop_pending"
	// KindLeaseReleaseOwed: a lease release failed and is owed (ACT-8).
	KindLeaseReleaseOwed = "lease.release_owed"
	// KindLeaseReleaseSettled: an owed release landed or became moot.
	KindLeaseReleaseSettled = "lease.release_settled"
	// KindSidecarDone: a sidecar (or worker) exited 0 and its work is done
	// (ACT-12).
	KindSidecarDone = "sidecar.done"
	// KindSidecarRecycled: a sidecar ran longer than max_run (ACT-12).
	KindSidecarRecycled = "sidecar.recycled"
)

// WakeReason says why a host wakes.
type WakeReason string

const (
	// WakeRequest: an HTTP request reached the edge (ACT-3).
	WakeRequest WakeReason = "request"
	// WakeDue: the due-time sweep found the host's time had come (ACT-10).
	WakeDue WakeReason = "due"
	// WakeRedeploy: a new revision arrived while the host was awake; it
	// slept and wakes again on the new definition.
	WakeRedeploy WakeReason = "redeploy"
	// WakeDeploy: a standalone worker's first sight or new revision.
	WakeDeploy WakeReason = "deploy"
	// WakeBoot: a non-hibernating standalone worker starts with its actor.
	WakeBoot WakeReason = "boot"
	// WakeResume: the host actor (or the daemon) restarted while this node
	// still held the host's lease; it wakes again on the local copy.
	WakeResume WakeReason = "resume"
)

// HostWake asks a host actor to be awake (from the edge or the activator's
// sweep). When the sender is set it is answered with a HostWakeResult once
// the wake ends, coalesced with every other waiter of that wake (ACT-3).
type HostWake struct {
	Host   string
	Reason WakeReason
}

// HostWakeResult answers HostWake. OK means the host serves now; otherwise
// Status (503 unless said) and RetryAfter are what the edge answers.
type HostWakeResult struct {
	Host       string
	OK         bool
	Status     int
	RetryAfter time.Duration
	Err        string
}

// HostSweep is the activator's periodic nudge (every sweep interval) to
// each host: retry a pending stop or an owed release (ACT-8).
type HostSweep struct{}

// HostDrain tells a host the node is shutting down (ACT-13): nothing wakes
// from now on, and an awake host goes to sleep. It reports a HostReport
// with Drained once it is asleep.
type HostDrain struct{}

// HostRetire tells a host its service is gone: it goes to sleep, clears
// its due time and ends.
type HostRetire struct{}

// HostReport is what a host tells the activator after a change: its state,
// its next due time (zero when none, ACT-10), whether it owes a lease
// release, and whether it is drained (ACT-13).
type HostReport struct {
	Key     string
	Host    string
	State   HostState
	Due     time.Time
	Owes    bool
	Drained bool
}

// HostStatus is a host's published snapshot (SUP-3).
type HostStatus struct {
	Host       string    `json:"host"`
	Stack      string    `json:"stack"`
	Service    string    `json:"service"`
	Revision   string    `json:"revision"`
	Deployment string    `json:"deployment"`
	State      HostState `json:"state"`
	Since      time.Time `json:"since"`
	Instance   string    `json:"instance,omitempty"`
	Address    string    `json:"address,omitempty"`
	LeaseEpoch uint64    `json:"lease_epoch,omitempty"`
	Due        time.Time `json:"due,omitempty"`
	// NextAttempt is when a restarting host's actor starts again.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	// LeaseUntil is when this node's lease stops being valid unless
	// renewed (its ValidUntil), while it holds one.
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// Fenced is set by the status reader: the host shows awake, waking or
	// stopping here, but this node's lease is past LeaseUntil, so its gate
	// admits nothing (ACT-14): a node that was frozen longer than the TTL.
	Fenced    bool   `json:"fenced,omitempty"`
	OwesLease bool   `json:"owes_release,omitempty"`
	Pending   string `json:"pending,omitempty"`
	// Busy names the operations in flight (a restore, a renew...).
	Busy      string `json:"busy,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// LastWake lists the steps of the last wake with their durations.
	LastWake []WakeStep `json:"last_wake,omitempty"`
	Wakes    int        `json:"wakes"`
	// Replication is the host's replication class (stream, batched,
	// daily; ACT-9) and Replicated what it shipped (ACT-17).
	Replication string `json:"replication,omitempty"`
	Replicated
}

// FencedAt says whether h, read at now, shows a host up on a lease this
// node may no longer act on.
func (h HostStatus) FencedAt(now time.Time) bool {
	up := h.State == HostAwake || h.State == HostWaking || h.State == HostStopping
	return up && !h.LeaseUntil.IsZero() && !now.Before(h.LeaseUntil)
}

// Replicated is what a host has shipped to the object store while awake
// (ACT-17). Times are the daemon's clock at the start of the scan that
// found the state, so the store holds at least the data directory as it
// was then.
type Replicated struct {
	// LastShipped is when the last checkpoint that uploaded anything
	// began; LastShippedBytes what it uploaded.
	LastShipped      time.Time `json:"last_shipped,omitzero"`
	LastShippedBytes int64     `json:"last_shipped_bytes,omitempty"`
	// Synced is the last time the store was known to hold the data
	// directory's state: a checkpoint landed, a scan found nothing changed
	// since, or the directory was just restored from it.
	Synced time.Time `json:"synced,omitzero"`
}

// Reset is what a new wake starts from: the last shipment is kept (it is
// still the newest state in the store), the sync point is not.
func (r Replicated) Reset() Replicated {
	return Replicated{LastShipped: r.LastShipped, LastShippedBytes: r.LastShippedBytes}
}

// LossWindow is how much an awake host would lose if its node died at
// now: the time since the store was last known to hold its state (since
// it woke, when never). Only an awake or stopping host has one: an asleep
// host's data was parked at sleep (ACT-17).
func (h HostStatus) LossWindow(now time.Time) time.Duration {
	if h.State != HostAwake && h.State != HostStopping {
		return 0
	}
	from := h.Synced
	if from.IsZero() {
		from = h.Since
	}
	if d := now.Sub(from); d > 0 {
		return d
	}
	return 0
}

// WakeStep is one step of a wake and how long it took (ACT-4).
type WakeStep struct {
	Step     string        `json:"step"`
	Duration time.Duration `json:"duration"`
}

// HostOpDone is a host actor's own message: the operation numbered Seq,
// run in a goroutine, ended. Outcome is one the host core knows; what the
// operation produced (a lease, an address) waits in the actor under Seq.
type HostOpDone struct {
	Seq     uint64
	Op      string
	Outcome string
	Err     string
}

// HostInstanceExited is a host actor's own message: the driver's watch saw
// its instance's run end.
type HostInstanceExited struct {
	Instance string
	Exit     drivers.Exit
}

// SidecarStop asks a sidecar actor to stop its process (SIGTERM, its grace,
// then kill) and end. It answers with a SidecarReport whose Stopped or
// Unproven is set; an unproven stop is retried by sending SidecarStop
// again (ACT-8).
type SidecarStop struct{}

// SidecarPhase is a sidecar's state.
type SidecarPhase string

const (
	SidecarStarting SidecarPhase = "starting"
	SidecarRunning  SidecarPhase = "running"
	SidecarBackoff  SidecarPhase = "backoff"
	SidecarDone     SidecarPhase = "done"
	SidecarStopping SidecarPhase = "stopping"
	SidecarStopped  SidecarPhase = "stopped"
)

// SidecarReport is what a sidecar tells its host after a change.
type SidecarReport struct {
	Name     string
	Phase    SidecarPhase
	AlwaysOn bool
	Restarts int
	ExitCode int
	// Unproven: a stop was asked but the process is not proven exited.
	Unproven bool
	LastErr  string
}

// SidecarOpDone is a sidecar actor's own message: a driver call ended.
type SidecarOpDone struct {
	Op  string
	Err error
}

// SidecarExited is a sidecar actor's own message: its run ended.
type SidecarExited struct {
	Exit drivers.Exit
}

// ActivatorOwedDone is the activator's own message: a retry of an owed
// release of a host without an actor ended; Settled when nothing is owed
// any more.
type ActivatorOwedDone struct {
	Host    string
	Settled bool
	Err     string
}

// DueTime is a sleeping host's next due wake (ACT-10), as the journal keeps it.
type DueTime struct {
	Host       string    `json:"host"`
	At         time.Time `json:"at"`
	RecordedAt time.Time `json:"recorded_at"`
}

// OwedRelease is a lease release that failed and is owed (ACT-8): it is
// retried until it lands or the lease has expired. Epoch and ETag identify
// the lease held and are opaque to the journal.
type OwedRelease struct {
	Host      string    `json:"host"`
	Epoch     string    `json:"epoch"`
	ETag      string    `json:"etag"`
	Expires   time.Time `json:"expires"`
	OwedSince time.Time `json:"owed_since"`
	Attempts  int       `json:"attempts"`
	// LastError is the last failure, as the caller words it. It must not
	// carry credentials (SEC-2).
	LastError string `json:"last_error,omitempty"`
}
