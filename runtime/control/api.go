package control

import (
	"time"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// This file holds every op's arguments and result. Both the server and the
// client use them; the JSON tags are the wire format (docs/control.md).

// ServiceRef names one service: {"stack": "web", "service": "api"}.
type ServiceRef struct {
	Stack   string `json:"stack"`
	Service string `json:"service"`
}

// String is "stack/service".
func (r ServiceRef) String() string { return r.Stack + "/" + r.Service }

// StackRef names one stack.
type StackRef struct {
	Stack string `json:"stack"`
}

// StatusArgs filters status. Empty fields mean everything.
type StatusArgs struct {
	Stack   string `json:"stack,omitempty"`
	Service string `json:"service,omitempty"` // needs Stack
}

// StatusResult is the node at a glance (DMN-13, SVC-19): the daemon's
// lifecycle snapshot, then stacks, then services with their replicas.
type StatusResult struct {
	Daemon   DaemonStatus             `json:"daemon"`
	Stacks   []messages.StackStatus   `json:"stacks"`
	Services []messages.ServiceStatus `json:"services"`
	// Hosts are the hibernating hosts and standalone workers (ACT-2).
	Hosts []messages.HostStatus `json:"hosts,omitempty"`
}

// DaemonStatus is the daemon process and its lifecycle.
type DaemonStatus struct {
	Lifecycle lifecycle.State `json:"lifecycle"`
	Node      NodeIdentity    `json:"node"`
	PID       int             `json:"pid"`
	Version   string          `json:"version,omitempty"`
	StartedAt time.Time       `json:"started_at"`
	// PreviousRun is "clean" or "crashed" (DMN-3).
	PreviousRun string `json:"previous_run,omitempty"`
	// DataDir is the daemon's data directory.
	DataDir string `json:"data_dir,omitempty"`
}

// NodeIdentity is the node's recorded identity (DMN-5).
type NodeIdentity struct {
	Name string `json:"name,omitempty"`
	ID   string `json:"id,omitempty"`
}

// TreeResult is every live actor, sorted by path (SUP-1).
type TreeResult struct {
	Nodes []supervise.Node `json:"nodes"`
}

// WhyArgs names a service and optionally one slot (0: every slot).
type WhyArgs struct {
	Stack   string `json:"stack"`
	Service string `json:"service"`
	Slot    int    `json:"slot,omitempty"`
}

// WhyResult explains a service's restarts slot by slot (SUP-18).
type WhyResult struct {
	Stack   string                `json:"stack"`
	Service string                `json:"service"`
	State   messages.ServiceState `json:"state"`
	Message string                `json:"message,omitempty"`
	Slots   []WhySlot             `json:"slots"`
	// Host is the service's hibernating host, when it has one.
	Host *messages.HostStatus `json:"host,omitempty"`
	// Waiting are the service's actors that ended and wait out their
	// supervisor's backoff, with their next attempt (SUP-21).
	Waiting []supervise.Node `json:"waiting,omitempty"`
}

// WhySlot is one slot's ledger entry and its replica's state.
type WhySlot struct {
	Slot      int    `json:"slot"`
	Instance  string `json:"instance,omitempty"`
	Phase     string `json:"phase,omitempty"`
	Health    string `json:"health,omitempty"`
	Restarts  int    `json:"restarts"`
	LastError string `json:"last_error,omitempty"`
	// HasLedger is false when the slot has no failure history; Ledger is
	// then zero.
	HasLedger bool            `json:"has_ledger"`
	Ledger    messages.Ledger `json:"ledger"`
}

// EventsArgs selects events: those with Seq > Since; with Since 0 and Tail
// > 0, the last Tail events. Follow keeps the stream open for new events
// until the client cancels or closes.
type EventsArgs struct {
	Since  uint64 `json:"since,omitempty"`
	Tail   int    `json:"tail,omitempty"`
	Follow bool   `json:"follow,omitempty"`
}

// EventsResult ends an events stream: Last is the sequence number of the
// last event sent (or Since if none was), to resume with Since = Last.
type EventsResult struct {
	Last uint64 `json:"last"`
	// Memory: the journal is not open (the runtime is stopped or failed,
	// or the journal is damaged); the events are the daemon's own since
	// it closed the journal, kept in memory and numbered on their own.
	Memory bool `json:"memory,omitempty"`
}

// HistoryArgs selects deploy audit entries (issue 17): of Stack (every
// stack when empty), the newest Limit (0: the daemon's default, 1000).
type HistoryArgs struct {
	Stack string `json:"stack,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// HistoryResult is the entries, oldest first (newest last).
type HistoryResult struct {
	Entries []messages.AuditEntry `json:"entries"`
}

// StopArgs: Hold also writes the hold marker (DMN-4).
type StopArgs struct {
	Hold bool `json:"hold,omitempty"`
}

// LifecycleResult answers start, stop, restart, retry and exit: the
// lifecycle snapshot right after the operator's event was accepted (the
// drain or boot it started goes on in the background).
type LifecycleResult struct {
	State lifecycle.State `json:"state"`
}

// ReconfigureResult answers reconfigure (DMN-16). A config or stack file
// that does not load is an `invalid` error instead, listing every problem;
// nothing changed then.
type ReconfigureResult struct {
	State lifecycle.State `json:"state"`
	// Reloaded is set when the running daemon read the config and applied
	// it now; unset, the lifecycle took the request its own way (a failed
	// boot boots again, a boot in progress re-reads the config).
	Reloaded bool `json:"reloaded,omitempty"`
	// Applied lists what changed in place (keys, and one line per stack
	// that changed); NeedsRestart the settings that take effect only after
	// a restart or a relaunch.
	Applied      []string `json:"applied,omitempty"`
	NeedsRestart []string `json:"needs_restart,omitempty"`
}

// RestartChildArgs names an actor path as `engenho tree` prints it.
type RestartChildArgs struct {
	Path string `json:"path"`
}

// RestartChildResult answers restart-child.
type RestartChildResult struct {
	Path string `json:"path"`
}

// Reinit targets (DMN-14): the only values "what" may take (SEC-3).
const (
	ReinitJournal  = "journal"
	ReinitIdentity = "identity"
)

// ReinitTargets lists the allowed reinit targets.
var ReinitTargets = []string{ReinitJournal, ReinitIdentity}

// EpochArgs asks what a reinit of What would do now.
type EpochArgs struct {
	What string `json:"what"`
}

// EpochResult is what the client shows before asking to confirm a reinit.
type EpochResult struct {
	State lifecycle.State `json:"state"`
	Epoch uint64          `json:"epoch"`
	// Allowed is false while the runtime is not stopped or failed; Reason
	// says why.
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	// Moves lists the paths that would be moved to the attic.
	Moves []string `json:"moves"`
	// Attic is the directory they would be moved under (DATA/attic).
	Attic string `json:"attic,omitempty"`
}

// ReinitArgs carries the epoch the user confirmed at; a moved epoch is a
// conflict (DMN-14).
type ReinitArgs struct {
	What  string `json:"what"`
	Epoch uint64 `json:"epoch"`
}

// ReinitResult lists where things went. For the journal it also says what
// the new journal kept (REL-5): Salvaged counts records by type, Lost says
// why nothing was salvaged, Notes says it all for humans.
type ReinitResult struct {
	What     string         `json:"what"`
	Moved    []string       `json:"moved"`
	Salvaged map[string]int `json:"salvaged,omitempty"`
	Lost     string         `json:"lost,omitempty"`
	Notes    []string       `json:"notes,omitempty"`
	// Offline: no daemon ran; the client did it under the data
	// directory's lock.
	Offline bool `json:"offline,omitempty"`
}

// ApplyFile is one stack file: Name as the user gave it (for error
// messages), Content its text.
type ApplyFile struct {
	Name    string `json:"name"`
	Content string `json:"content"`
	// Dir is the file's project directory (absolute): where its .env and
	// relative env_file paths are read. Empty: none are read.
	Dir string `json:"dir,omitempty"`
}

// ApplyArgs deploys stack files (SVC-4, SVC-5). DryRun computes the plan and
// changes nothing. Wait streams progress until every changed service
// converged or one failed.
type ApplyArgs struct {
	Files  []ApplyFile `json:"files"`
	DryRun bool        `json:"dry_run,omitempty"`
	Wait   bool        `json:"wait,omitempty"`
	// Env is the environment given at apply time (the CLI's own), from
	// which the files' ${VAR} references and value-less environment keys
	// take their values. The daemon never uses its own environment for
	// them, and keeps only the values the files use.
	Env map[string]string `json:"env,omitempty"`
	// Profiles are the active Compose profiles (apply --profile).
	Profiles []string `json:"profiles,omitempty"`
}

// StackPlan is one stack's changes, service by service.
type StackPlan struct {
	Stack string `json:"stack"`
	// Deployment is the recorded deployment's id (empty for a dry run).
	Deployment string             `json:"deployment,omitempty"`
	Changes    []stackfile.Change `json:"changes"`
	// Notes say what the apply did to the operators' overrides: kept
	// or dropped (SVC-23).
	Notes []string `json:"notes,omitempty"`
	// Warnings are what the file loaded with but that does not mean what
	// it means in Compose (FILE:LINE: KEY: message).
	Warnings []string `json:"warnings,omitempty"`
}

// ApplyProgress is one stream item of apply --wait: first one with Planned
// (the recorded changes), then, as the rollout moves, an Event of a
// changed service as the journal records it, or a Service snapshot each
// time its state or a slot changes.
type ApplyProgress struct {
	Planned []StackPlan             `json:"planned,omitempty"`
	Service *messages.ServiceStatus `json:"service,omitempty"`
	Event   *messages.Event         `json:"event,omitempty"`
	// Note says what the wait does with the Service: a created service
	// that converged is held through its monitor window before the
	// verdict.
	Note string `json:"note,omitempty"`
}

// Outcome is how a waited rollout ended.
type Outcome string

const (
	OutcomeNone      Outcome = ""          // not waited
	OutcomeConverged Outcome = "converged" // every changed service converged
	OutcomeFailed    Outcome = "failed"    // a service paused, rolled back or failed
)

// ApplyResult is the plan and, with Wait, how the rollout ended: Outcome
// is the one verdict, Verdicts says it service by service, and Failed
// holds the snapshots of the services that failed, with their failure
// output.
type ApplyResult struct {
	DryRun   bool                     `json:"dry_run,omitempty"`
	Stacks   []StackPlan              `json:"stacks"`
	Outcome  Outcome                  `json:"outcome,omitempty"`
	Verdicts []ServiceVerdict         `json:"verdicts,omitempty"`
	Failed   []messages.ServiceStatus `json:"failed,omitempty"`
}

// ServiceVerdict is how one changed service's rollout ended: Outcome
// converged (for a removal: gone), failed with the Reason (the event or
// the state that decided it), or empty when the wait ended first (another
// service failed; this one is still rolling out).
type ServiceVerdict struct {
	Stack   string  `json:"stack"`
	Service string  `json:"service"`
	Outcome Outcome `json:"outcome,omitempty"`
	Reason  string  `json:"reason,omitempty"`
	// Seq is the event that decided it (0: the service's state did).
	Seq uint64 `json:"seq,omitempty"`
}

// RemoveArgs removes a stack; Volumes also deletes its volumes.
type RemoveArgs struct {
	Stack   string `json:"stack"`
	Volumes bool   `json:"volumes,omitempty"`
}

// ChangeResult answers remove, rollback and redeploy with the changes made:
// the deployment recorded and each service's change, as a plan shows it.
type ChangeResult struct {
	Stack      string             `json:"stack"`
	Deployment string             `json:"deployment,omitempty"`
	Changes    []stackfile.Change `json:"changes"`
	// AlreadyRemoving answers a remove of a stack already being removed:
	// nothing new was recorded, the removal goes on.
	AlreadyRemoving bool `json:"already_removing,omitempty"`
	// Override is the override a rollback left in force (SVC-23); Notes
	// say what it means.
	Override *messages.Override `json:"override,omitempty"`
	Notes    []string           `json:"notes,omitempty"`
	// VolumesDeleted are the named volumes `remove --volumes` deleted,
	// once the stack was gone.
	VolumesDeleted []string `json:"volumes_deleted,omitempty"`
}

// ScaleArgs sets a service's replica count (SVC-17).
type ScaleArgs struct {
	Stack    string `json:"stack"`
	Service  string `json:"service"`
	Replicas int    `json:"replicas"`
}

// ScaleResult answers scale.
type ScaleResult struct {
	Stack   string `json:"stack"`
	Service string `json:"service"`
	From    int    `json:"from"`
	To      int    `json:"to"`
	// FileReplicas is the stack file's count; Override is the override
	// now in force, none when the file's count runs (SVC-23); Changed is
	// false when the service already had To.
	FileReplicas int                `json:"file_replicas"`
	Override     *messages.Override `json:"override,omitempty"`
	Changed      bool               `json:"changed"`
}

// ServiceIntentResult answers service-stop and service-start (SVC-10).
type ServiceIntentResult struct {
	Stack   string `json:"stack"`
	Service string `json:"service"`
	Stopped bool   `json:"stopped"`
	// Changed is false when the intent already was what was asked.
	Changed bool `json:"changed"`
}

// LogsArgs selects replica output (SVC-21): Slot 0 is every slot; Lines is
// how many past lines per replica (0: the server's default); Follow
// streams new output until the client cancels or closes.
type LogsArgs struct {
	Stack   string `json:"stack"`
	Service string `json:"service"`
	Slot    int    `json:"slot,omitempty"`
	Lines   int    `json:"lines,omitempty"`
	Follow  bool   `json:"follow,omitempty"`
}

// LogChunk is a piece of one replica's output: whole lines, newline
// terminated.
type LogChunk struct {
	Slot     int    `json:"slot"`
	Instance string `json:"instance,omitempty"`
	Stream   string `json:"stream,omitempty"` // stdout, stderr, or empty when merged
	Text     string `json:"text"`
}

// LogsResult ends a logs stream.
type LogsResult struct {
	// Truncated is set when older output was dropped by the retention
	// bound before Lines could be met.
	Truncated bool `json:"truncated,omitempty"`
}

// ChaosArgs injects a fault (the chaos suite, CHS-2). Kind names the fault,
// Target what it hits (an actor path, STACK/SERVICE[/SLOT], a host).
type ChaosArgs struct {
	Kind   string            `json:"kind"`
	Target string            `json:"target,omitempty"`
	Params map[string]string `json:"params,omitempty"`
}

// ChaosResult says what was done.
type ChaosResult struct {
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// CancelArgs ends the request with ID in flight on the same connection.
type CancelArgs struct {
	ID uint64 `json:"id"`
}

// CancelResult says whether such a request was in flight.
type CancelResult struct {
	Cancelled bool `json:"cancelled"`
}
