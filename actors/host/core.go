package host

import (
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Config is what the core needs to decide; the shell derives it from the
// host's definition and the node's settings.
type Config struct {
	// Hibernating hosts hold a lease, checkpoint and sleep when idle; a
	// plain standalone worker does none of it.
	Hibernating bool
	// HasInstance: the service runs an instance (a standalone worker has
	// only sidecars).
	HasInstance bool
	HasSeed     bool
	HasSidecars bool
	// Idle is the idle window (ACT-7).
	Idle        time.Duration
	Replication string
	// RenewEvery is the lease renewal cadence, TTL/3 (ACT-5).
	RenewEvery time.Duration
	// StreamScan, BatchedEvery, DailyEvery: checkpoint cadences (ACT-9).
	StreamScan   time.Duration
	BatchedEvery time.Duration
	DailyEvery   time.Duration
	// CheckpointRetry is the wait after a failed periodic checkpoint
	// (stream retries at StreamScan).
	CheckpointRetry time.Duration
	// ReadyTimeout bounds the wait for readiness (ACT-4).
	ReadyTimeout time.Duration
	// Readiness is probed every ProbeFirst for ProbeFastFor, then at a
	// doubling interval up to ProbeMax (the healthcheck's start_interval):
	// a wake is served within milliseconds of the instance being ready.
	ProbeFirst   time.Duration
	ProbeFastFor time.Duration
	ProbeMax     time.Duration
	// RetryAfter is the Retry-After of a failed wake (ACT-3, 5s).
	RetryAfter time.Duration
	// DueRecheck is the least wait before a host kept awake by a near due
	// time looks again (ACT-10).
	DueRecheck time.Duration
}

// Defaults of Config fields the definition does not give.
const (
	DefaultRenewEvery      = 10 * time.Second // TTL 30s / 3 (ACT-5)
	DefaultStreamScan      = time.Second      // ACT-9
	DefaultBatchedEvery    = 5 * time.Minute  // ACT-9
	DefaultDailyEvery      = 24 * time.Hour   // ACT-9
	DefaultCheckpointRetry = time.Minute
	DefaultReadyTimeout    = 2 * time.Minute
	DefaultProbeFirst      = 5 * time.Millisecond
	DefaultProbeFastFor    = time.Second
	DefaultRetryAfter      = 5 * time.Second // ACT-3
	DefaultDueRecheck      = 5 * time.Second
)

// ConfigOf derives the core's config from a definition.
func ConfigOf(svc stackfile.Service) Config {
	c := Config{
		HasInstance: !svc.Standalone(), HasSidecars: len(svc.Sidecars) > 0,
		RenewEvery: DefaultRenewEvery, StreamScan: DefaultStreamScan, BatchedEvery: DefaultBatchedEvery,
		DailyEvery: DefaultDailyEvery, CheckpointRetry: DefaultCheckpointRetry, ReadyTimeout: DefaultReadyTimeout,
		ProbeFirst: DefaultProbeFirst, ProbeFastFor: DefaultProbeFastFor, ProbeMax: svc.Healthcheck.StartInterval, RetryAfter: DefaultRetryAfter,
		DueRecheck: DefaultDueRecheck,
	}
	if st := svc.Engenho.StepTimeout; st > 0 {
		c.ReadyTimeout = st
	}
	if c.ProbeMax <= 0 {
		c.ProbeMax = time.Second
	}
	if h := svc.Hibernate; h != nil {
		c.Hibernating, c.HasSeed = true, len(h.Seed) > 0
		c.Idle, c.Replication = h.Idle, h.Replication
	}
	return c
}

// Op is an operation the shell runs in a goroutine. Main operations run one
// at a time (State.Op); side operations (renew, periodic checkpoint, tick)
// run beside them, one of each kind.
type Op string

// Main operations.
const (
	OpNone Op = ""
	// OpCleanup stops and deletes instances an earlier incarnation left.
	OpCleanup Op = "cleanup"
	// The wake steps, in order (ACT-4); each names its step in the
	// host.woke event.
	OpDefinition Op = "definition"
	OpAcquire    Op = "lease"
	OpRestore    Op = "restore"
	OpSeed       Op = "seed"
	OpStart      Op = "start"
	// OpReadyCheck checks once whether the started instance is ready (its
	// healthcheck, or a TCP connect); it runs again on TimerReadyCheck
	// until it is, and together they make the wake step StepReady.
	OpReadyCheck Op = "ready_check"
	// OpNextDue asks the instance for its next due time (ACT-10).
	OpNextDue Op = "next_due"
	// The sleep steps, in order (ACT-8).
	OpStopInstance Op = "stop_instance"
	OpCheckpoint   Op = "checkpoint"
	OpSetDue       Op = "set_due"
	OpRelease      Op = "release"
	// OpReleaseOwed retries an owed release while asleep (ACT-8).
	OpReleaseOwed Op = "release_owed"
)

// Side operations.
const (
	SideRenew      Op = "renew"
	SideCheckpoint Op = "periodic_checkpoint"
	SideTick       Op = "tick"
)

// Outcomes of an operation.
const (
	OK        = "ok"
	Failed    = "failed"
	Held      = "held"       // the lease is held by someone else
	Lost      = "lost"       // the lease was lost or the manifest fenced us
	FirstBoot = "first_boot" // no local and no remote state
	Corrupt   = "corrupt"
	Unproven  = "unproven" // a stop not proven
	Unchanged = "unchanged"
	NotReady  = "not_ready"
	Stopped   = "stopped" // the definition carries a stopped intent
	// Resume: the cleanup found the host's lease still held under this
	// node's holder id, unreleased: an earlier incarnation of the actor, or
	// the last daemon run, ended awake (or before its release).
	Resume = "resume"
)

// Wake steps that are not one operation (the others are named by their
// Op): the host.woke event's fields step.NAME and the status's last wake.
const (
	// StepReady is the wait from the instance's start until it is ready:
	// every OpReadyCheck and the pauses between them (ACT-4).
	StepReady    = "ready"
	StepSidecars = "sidecars"
)

// Timer names.
const (
	TimerRenew      = "renew"
	TimerIdle       = "idle"
	TimerCheckpoint = "checkpoint"
	// TimerReadyCheck runs the next OpReadyCheck.
	TimerReadyCheck = "ready_check"
)

// Stop stages, in order (ACT-8).
const (
	stageNone       = ""
	stageSidecars   = "sidecars"
	stageInstance   = "instance"
	stageCheckpoint = "checkpoint"
	stageDue        = "due"
	stageRelease    = "release"
)

// Wait reasons while no main operation runs.
const (
	waitNone     = ""
	waitReady    = "ready"
	waitSidecars = "sidecars"
	waitSaving   = "saving"
	waitClose    = "close"
)

// State is a host's state. The zero value is before Begin.
type State struct {
	Phase     messages.HostState
	Since     time.Time
	Op        Op
	StepBegan time.Time
	Wait      string
	Wake      Wake
	// WakePending: a wake was asked while the host could not start one.
	WakePending       bool
	WakePendingReason messages.WakeReason

	Leased, LeaseLost bool
	// Started: the instance exists and must be stopped and deleted.
	Started    bool
	SidecarsUp bool
	// NeedFinal: the workload ran since the last restore, so sleep takes
	// a final checkpoint.
	NeedFinal      bool
	SkipCheckpoint bool
	Renewing       bool
	Saving         bool
	Ticking        bool
	SaveFailing    bool

	Stage   string
	Blocked string
	// StopReason says why the host stops: idle, failed wake, stand down...
	StopReason string

	Due      time.Time
	DueKnown bool
	Owes     bool

	Draining, Retiring, StoppedIntent bool
	// Outdated: a new revision arrived while waking; sleep and wake again
	// once served.
	Outdated bool
	// Forced: the next-due query is part of a forced sleep (drain, new
	// revision, stopped intent), not an idle check.
	Forced     bool
	Drained    bool
	ProbeDelay time.Duration
	ReadyBy    time.Time
	ReadyBegan time.Time
	Ended      bool
	LastErr    string
	// LastFailure is the last failure an event reported (a failed wake, a
	// stand-down, a stop not proven): the status's last error.
	LastFailure string
	Wakes       int
}

// Wake is the current (or last) wake.
type Wake struct {
	Reason messages.WakeReason
	Began  time.Time
	Steps  []messages.WakeStep
}

// Events.
type (
	// Begin: the actor started.
	Begin struct{}
	// WakeAsked: someone wants the host awake (a request or the sweep).
	WakeAsked struct{ Reason messages.WakeReason }
	// OpDone: a main operation ended.
	OpDone struct {
		Op         Op
		Outcome    string
		Err        string
		RetryAfter time.Duration
		Due        time.Time // OpNextDue
	}
	// SideDone: a side operation ended.
	SideDone struct {
		Op      Op
		Outcome string
		Err     string
	}
	// TimerFired: the timer Name fired.
	TimerFired struct{ Name string }
	// IdleCheck: what the gate says (the shell reads it for CheckIdle).
	IdleCheck struct {
		InFlight     int
		LastActivity time.Time
	}
	// GateClosed: the result of TryCloseGate.
	GateClosed struct{ OK bool }
	// InstanceExited: the instance's run ended.
	InstanceExited struct{ Code int }
	// SidecarsStopped: every sidecar was asked to stop; Proven unless one
	// could not prove it.
	SidecarsStopped struct{ Proven bool }
	// WorkerDone: every non-always_on sidecar of a standalone worker
	// exited 0 (ACT-12).
	WorkerDone struct{}
	// Sweep: the activator's periodic nudge.
	Sweep struct{}
	// Drain: the node shuts down (ACT-13).
	Drain struct{}
	// Retire: the service is gone.
	Retire struct{}
	// Definition: a new definition arrived; Changed when its revision
	// differs from the one running.
	Definition struct{ Changed, Stopped bool }
)

// The host core's own effects; the shared ones are step.Arm and
// step.Cancel (the timers above), step.Emit and step.End.
type (
	// Do runs main operation Op in a goroutine; OpDone follows.
	Do struct {
		step.Is
		Op Op
	}
	// Side runs side operation Op beside the main one; SideDone follows.
	Side struct {
		step.Is
		Op Op
	}
	// Answer answers every waiter of the wake.
	Answer struct {
		step.Is
		OK         bool
		Status     int
		RetryAfter time.Duration
		Err        string
	}
	// OpenGate opens the gate to the instance; Stamp: a request woke it,
	// which counts as activity.
	OpenGate struct {
		step.Is
		Stamp bool
	}
	// TryCloseGate closes the gate if nothing is in flight; GateClosed
	// follows.
	TryCloseGate struct{ step.Is }
	// SealGate closes the gate whatever is in flight.
	SealGate struct{ step.Is }
	// CheckIdle reads the gate; IdleCheck follows.
	CheckIdle struct{ step.Is }
	// StartSidecars starts the sidecar actors (ACT-11).
	StartSidecars struct{ step.Is }
	// StopSidecars asks every sidecar to stop; SidecarsStopped follows.
	StopSidecars struct{ step.Is }
	// RecordWake records a served wake's step durations (the node's
	// metrics); the host.woke event carries them too.
	RecordWake struct {
		step.Is
		Steps []messages.WakeStep
	}
)

// Step applies one event to the state and returns the effects.
func Step(cfg Config, s State, e any, now time.Time) (State, []step.Effect) {
	if s.Ended {
		return s, nil
	}
	m := &machine{cfg: cfg, s: s, now: now}
	switch e := e.(type) {
	case Begin:
		m.s.Phase, m.s.Since = messages.HostAsleep, now
		m.do(OpCleanup)
	case WakeAsked:
		m.wakeAsked(e.Reason)
	case OpDone:
		m.opDone(e)
	case SideDone:
		m.sideDone(e)
	case TimerFired:
		m.timer(e.Name)
	case IdleCheck:
		m.idleCheck(e)
	case GateClosed:
		m.gateClosed(e.OK)
	case InstanceExited:
		m.instanceExited(e.Code)
	case SidecarsStopped:
		m.sidecarsStopped(e.Proven)
	case WorkerDone:
		m.workerDone()
	case Sweep:
		m.sweep()
	case Drain:
		m.drain()
	case Retire:
		m.retire()
	case Definition:
		m.definition(e)
	}
	return m.s, m.fx
}

// machine is one Step in progress.
type machine struct {
	cfg Config
	s   State
	now time.Time
	fx  []step.Effect
}

func (m *machine) add(f ...step.Effect) { m.fx = append(m.fx, f...) }

func (m *machine) do(op Op) {
	m.s.Op, m.s.StepBegan, m.s.Wait = op, m.now, waitNone
	m.add(Do{Op: op})
}

func (m *machine) side(op Op) { m.add(Side{Op: op}) }

func (m *machine) arm(timer string, at time.Time) {
	m.add(step.Arm{Timer: timer, At: at})
}

func (m *machine) cancel(timers ...string) {
	for _, t := range timers {
		m.add(step.Cancel{Timer: t})
	}
}

// emit raises an event. A failure the status shows (a failed wake, a
// stand-down, a stop not proven) is kept as LastFailure.
func (m *machine) emit(kind string, level messages.Level, msg string) {
	switch kind {
	case messages.KindHostWakeFailed, messages.KindHostStoodDown, messages.KindHostStopPending:
		m.s.LastFailure = msg
	}
	m.add(step.Emit{Kind: kind, Level: level, Message: msg})
}

func (m *machine) phase(p messages.HostState, why string) {
	if m.s.Phase == p {
		return
	}
	from := m.s.Phase
	m.s.Phase, m.s.Since = p, m.now
	m.emit(messages.KindHostState, messages.LevelInfo, string(from)+" -> "+string(p)+why)
}

func (m *machine) answer(ok bool, status int, retry time.Duration, msg string) {
	m.add(Answer{OK: ok, Status: status, RetryAfter: retry, Err: msg})
}

// refuse answers every waiter with a 503 and the default Retry-After.
func (m *machine) refuse(msg string) {
	m.answer(false, 503, m.cfg.RetryAfter, msg)
}

// idles reports whether this host sleeps when idle (an HTTP host).
func (m *machine) idles() bool { return m.cfg.Hibernating && m.cfg.HasInstance }
