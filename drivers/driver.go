package drivers

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Driver runs workload instances on one backend. Every method takes a
// context, is safe to call concurrently, and returns errors of kind
// ErrNotFound, ErrTransient, ErrInvalid or ErrUnsupported (wrapped in *Error).
type Driver interface {
	// Name is the driver's config name: "process", "incus", "fake".
	Name() string
	// Validate checks that spec can run on this node (command or image
	// exists) without creating anything (spec SVC-2).
	Validate(ctx context.Context, spec Spec) error
	// Create makes a stopped instance from spec; its labels are stored with
	// the instance so List finds it after any daemon restart (SVC-3).
	Create(ctx context.Context, spec Spec) error
	Start(ctx context.Context, name string) error
	// Stop asks the instance to end (SIGTERM or the backend's equivalent),
	// waits up to grace, then kills it.
	Stop(ctx context.Context, name string, grace time.Duration) error
	Kill(ctx context.Context, name string) error
	// Delete removes a stopped instance and what the driver keeps for it.
	Delete(ctx context.Context, name string) error
	Inspect(ctx context.Context, name string) (Status, error)
	// Exec runs argv inside the instance (exec health probes).
	Exec(ctx context.Context, name string, argv []string) (ExecResult, error)
	Logs(ctx context.Context, name string, opts LogOptions) (io.ReadCloser, error)
	// List returns every instance whose labels include all of selector.
	List(ctx context.Context, selector Labels) ([]Status, error)
	// Usage reads what the instance's current run uses (spec DRV-16). A
	// stopped instance has zero Usage and no error.
	Usage(ctx context.Context, name string) (Usage, error)
	// Watch calls fn once when the named instance's current run ends. It
	// returns ErrUnsupported where the backend cannot tell (callers then rely
	// on Inspect). stop cancels the watch; fn is never called after stop
	// returns.
	Watch(name string, fn func(Exit)) (stop func(), err error)
}

// Labels are the key/value pairs stored with an instance.
type Labels map[string]string

// Match reports whether l includes every pair of selector. A missing label
// reads as "", so it matches an empty selector value: incus drops a config
// key set to "", and every driver answers List the same way.
func (l Labels) Match(selector Labels) bool {
	for k, v := range selector {
		if l[k] != v {
			return false
		}
	}
	return true
}

// Label keys engenho stores on every instance (spec SVC-3).
const (
	LabelStack      = "engenho.stack"
	LabelService    = "engenho.service"
	LabelSlot       = "engenho.slot"
	LabelRevision   = "engenho.revision"
	LabelDeployment = "engenho.deployment"
)

// Spec is everything a driver needs to create one instance.
type Spec struct {
	// Name is STACK-SERVICE-SLOT-ID, unique on the node.
	Name   string
	Labels Labels
	// Command is argv: the program for the process driver, the command run
	// inside the container for incus (empty: the image's init).
	Command []string
	// Image is the image alias (incus); unused by the process driver.
	Image string
	Env   map[string]string
	// SecretEnv names the Env entries whose values are secret (SEC-2): a
	// driver hands them to the workload but never stores them in
	// plaintext (the process driver seals them with Options.Sealer) nor
	// shows them.
	SecretEnv  []string
	WorkingDir string
	// User is "uid[:gid]" or a user name; empty is the daemon's own.
	User      string
	Ports     []Port
	Resources Resources
	// Mounts are the instance's volumes and bind mounts (Compose
	// `volumes:`), in file order.
	Mounts []Mount
	// Secrets are files the instance reads its secrets from (Compose
	// `secrets:`): under /run/secrets in a container, under the directory
	// named by ENGENHO_SECRETS_DIR for a process. Their values are never
	// stored in plaintext nor shown (SEC-2).
	Secrets []SecretFile
}

// Mount types.
const (
	// MountVolume is a named volume the driver keeps: created on first
	// use, kept across instances and restarts, deleted only by
	// Volumes.DeleteVolume (`engenho remove --volumes`).
	MountVolume = "volume"
	// MountBind is a host path.
	MountBind = "bind"
)

// Mount is one volume or bind mount of an instance.
type Mount struct {
	// Type is MountVolume or MountBind.
	Type string
	// Source is, for a volume, its node-wide name (the stack file's
	// top-level volumes.NAME.name, else STACK_NAME as Compose names it);
	// for a bind, an absolute host path.
	Source string
	// Target is the absolute path inside the instance.
	Target   string
	ReadOnly bool
	// External marks a volume made outside engenho (Compose's `external:
	// true`): the driver must not create it, and refuses to run without
	// it. Added for issue 15; false for a bind.
	External bool
}

// SecretFile is one secret an instance reads as a file.
type SecretFile struct {
	// Name is the file's name in the secrets directory; a valid file name
	// (no "/", not "." or "..").
	Name string
	// Value is the secret's content. Never log, show or store it in
	// plaintext.
	Value string
	// Mode is the file's mode; 0 means 0400.
	Mode uint32
}

// Volumes is implemented by drivers that keep named volumes.
type Volumes interface {
	// ListVolumes returns the names of the named volumes the driver keeps
	// whose name starts with prefix.
	ListVolumes(ctx context.Context, prefix string) ([]string, error)
	// DeleteVolume deletes a named volume no instance uses; a missing one
	// is not an error.
	DeleteVolume(ctx context.Context, name string) error
}

// Sealer keeps secret values at rest (SEC-2): Seal encrypts plaintext
// under the node's key, Open reverses it. label says what the value is
// (an env variable's name); a sealed value opens only under its label.
type Sealer interface {
	Seal(label, plaintext string) (string, error)
	Open(label, sealed string) (string, error)
}

// Port publishes Target (the port the workload listens on) at
// 127.0.0.1:HostPort. The process driver cannot remap a port: it gives the
// workload HostPort in the environment (PORT for the first, PORT_<target>
// for each) and the workload must listen there.
type Port struct {
	Target   int
	HostPort int
	Protocol string // "tcp"
}

// Resources are optional limits; zero means none (DRV-13).
type Resources struct {
	// CPUs is a share of CPU time: 0.25 is a quarter of one CPU.
	CPUs float64
	// MemoryBytes is the hard memory limit (swap included where the
	// backend can): past it the kernel OOM-kills a process of the
	// instance.
	MemoryBytes int64
	// MemoryReservationBytes is a soft limit: memory the instance keeps
	// under pressure (cgroup v2 memory.low, v1 soft limit).
	MemoryReservationBytes int64 `json:",omitempty"`
	// Pids caps the processes and threads of the instance.
	Pids int64 `json:",omitempty"`
}

// State is an instance's coarse state.
type State string

const (
	StateRunning    State = "running"
	StateStopped    State = "stopped"
	StateStarting   State = "starting"
	StateRestarting State = "restarting"
	StatePaused     State = "paused"
	StateUnknown    State = "unknown"
)

// Status is what Inspect and List observe about an instance.
type Status struct {
	Name   string
	State  State
	Labels Labels
	// StartedAt is when the current run began (zero when stopped). A change
	// the daemon did not cause means something else restarted it (SVC-9).
	StartedAt time.Time
	Pid       int
	// Addresses maps a published Target port to the host address that
	// reaches it, e.g. 80 -> "127.0.0.1:41234".
	Addresses map[int]string
	// ExitCode of the last run, when stopped; -1 when unknown.
	ExitCode int
}

// Exit reports the end of one run of an instance.
type Exit struct {
	Name     string
	ExitCode int    // -1 when killed by a signal or unknown
	Signal   string // e.g. "killed", empty when it exited
	// Reason, when set, says why the run ended better than the code or
	// signal: "oom-killed (limit 64 MiB)" (DRV-14).
	Reason string
	At     time.Time
	// Restarted: the driver started the instance's next run at once, as a
	// RestartWatcher's watch authorized it to.
	Restarted bool
}

// RestartWatcher is a driver that can start an instance's next run
// itself, at once, when its current run ends (PERF-1): the supervisor
// authorizes one such restart ahead, when its restart policy would
// restart the next failure at once anyway, and keeps the accounting (the
// ladder, the events) when it hears of it. The run ends, the driver
// starts the next one with no round trip through the supervisor, then
// calls fn with an Exit that says Restarted. A restart that cannot be
// made (the start fails, the watch was cancelled, the instance was
// started meanwhile) is not, and the Exit says so.
type RestartWatcher interface {
	// WatchRestart is Watch that authorizes one restart of the current
	// run. stop cancels both; Stop and Kill of the instance withdraw the
	// authorization before they signal the run.
	WatchRestart(name string, p RestartPolicy, fn func(Exit)) (stop func(), err error)
}

// RestartPolicy says which ends of a run a RestartWatcher restarts.
type RestartPolicy struct {
	// OnFailureOnly restarts only a run that failed: a non-zero exit
	// code or a signal (restart_policy on-failure).
	OnFailureOnly bool
}

// Failed reports whether e is a failure: a non-zero code or a signal.
func (e Exit) Failed() bool { return e.ExitCode != 0 || e.Signal != "" }

// Describe is the run's end in words: Reason, else "killed by signal
// SIG", "exited with code N", or that the status is unknown (code -1).
func (e Exit) Describe() string {
	switch {
	case e.Reason != "":
		return e.Reason
	case e.Signal != "":
		return "killed by signal " + e.Signal
	case e.ExitCode < 0:
		// An adopted process is not the daemon's child, and the kernel
		// gives an exit status to the parent only; incus may not keep one.
		return "ended; its exit status is unknown (an adopted run, or one its backend does not report)"
	}
	return fmt.Sprintf("exited with code %d", e.ExitCode)
}

// Usage is what an instance's run uses, as its backend counts it (DRV-16).
type Usage struct {
	// CPU is the CPU time used, a counter: for the process driver over
	// the life of the instance's cgroup (every run since it was started),
	// for incus since the container started.
	CPU time.Duration
	// MemoryBytes is the memory charged to the instance now, what its
	// limit is counted against (page cache included).
	MemoryBytes int64
	// MemoryPeakBytes is the highest MemoryBytes over the same span as
	// CPU; 0 where the backend does not keep it.
	MemoryPeakBytes int64
	// Pids is the number of processes (and threads, for cgroups) now.
	Pids int64
}

// ExecResult is the outcome of Exec.
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

// LogOptions select instance output.
type LogOptions struct {
	// Tail returns only the last Tail lines; 0 means all that is kept.
	Tail int
	// Follow keeps the reader open and streams new output until ctx ends.
	Follow bool
}
