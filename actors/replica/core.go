package replica

import (
	"errors"
	"fmt"
	"time"

	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/probe"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Phase is where a replica is in its life (SVC-6).
type Phase string

const (
	PhaseAdopting  Phase = "adopting"
	PhaseCreating  Phase = "creating"
	PhaseStarting  Phase = "starting"
	PhaseProbing   Phase = "probing"
	PhaseServing   Phase = "serving"
	PhaseUnhealthy Phase = "unhealthy"
	PhaseDown      Phase = "down"
	PhaseStopping  Phase = "stopping"
	PhaseStopped   Phase = "stopped"
	PhaseFailed    Phase = "failed"
	PhaseRetiring  Phase = "retiring"
	PhaseGone      Phase = "gone"
)

// Op is a driver call.
type Op = messages.ReplicaOp

const (
	OpNone    Op = ""
	OpCreate  Op = "create"
	OpStart   Op = "start"
	OpStop    Op = "stop"
	OpDelete  Op = "delete"
	OpInspect Op = "inspect"
)

// A replica's timers, by name; each has at most one armed.
const (
	TimerRestart = "restart"
	TimerProbe   = "probe"
	TimerSweep   = "sweep"
	TimerStable  = "stable"
)

// Policy is the replica's share of the service definition.
type Policy struct {
	// Condition is none, on-failure or any (SUP-16).
	Condition   string
	MaxAttempts int // 0 = unlimited
	Window      time.Duration
	// Delay is restart_policy.delay: a floor under every restart wait,
	// wait = max(Delay, the ladder's step).
	Delay time.Duration
	// UnhealthyThreshold is the count of consecutive unhealthy observations
	// before a restart (SUP-14, default 2).
	UnhealthyThreshold int
	// RestartsBeforeReplace: a replica restarted this many times for being
	// unhealthy, without becoming healthy, is replaced (SUP-15, default 3).
	RestartsBeforeReplace int
	StopGrace             time.Duration
	// Sweep is how often a running instance is inspected (SVC-9).
	Sweep time.Duration
	// ListSwept: the service sweeps for the replica (it lists its
	// instances every Sweep and sends Sweep to a replica whose instance
	// changed or is missing), so the replica arms no periodic sweep of its
	// own; Sweep still bounds how soon a refused instance is inspected
	// again.
	ListSwept bool
	// TransientRetry is the wait after a transient driver error.
	TransientRetry time.Duration
	// FailClosed turns on fail-closed recovery (SVC-30..SVC-33,
	// failclosed.go): withdraw before touching, verify before publishing,
	// refuse unsafe states. The service sets it for its replicas.
	FailClosed bool
	// NoRotation: the service publishes no port, so its replicas are in
	// no balancer rotation and a touch needs no withdrawal (SVC-30).
	NoRotation bool
	// DriverRestarts: the driver can restart a failed run itself, at once,
	// when authorized ahead (drivers.RestartWatcher, PERF-1). The actor
	// sets it from its driver.
	DriverRestarts bool
}

// Config is fixed for the life of a replica actor.
type Config struct {
	Probe  probe.Config
	Ladder ladder.Config
	Policy Policy
}

// State is everything a replica knows. It is a value.
type State struct {
	Phase   Phase
	Op      Op
	Intent  messages.Intent
	Created bool
	Running bool
	// StartedAt is the start time of the current run as the driver reports
	// it; a different one the replica did not cause means something else
	// restarted the instance (SVC-9).
	StartedAt time.Time
	// RunSeen is when this incarnation learned of the current run, on its
	// own clock: probes started before it were for an earlier run. The
	// run's StartedAt cannot tell: it is the wall time the driver wrote
	// down, which a clock stepped back (NTP, an operator) puts ahead of
	// every probe for as long as the step (issue 18, clock.jump).
	RunSeen      time.Time
	Addresses    map[int]string
	Health       probe.Tracker
	InRotation   bool
	ServingSince time.Time
	CreatedAt    time.Time

	Entry    messages.Ledger
	HasEntry bool
	// NextAttempt is when a start (or create) may next run.
	NextAttempt time.Time

	Restarts       int
	HealthRestarts int
	Attempts       []time.Time // restart attempts in the policy window

	// startPending marks an inspect that follows our own start call;
	// afterFailedStart one that follows a start call that failed (SVC-8).
	startPending     bool
	afterFailedStart bool
	healthRestart    bool
	// restarting marks a start that is a restart (Restarts counted it):
	// the inspection that finds the instance running then emits
	// replica.restarted. A run found stopped clears it.
	restarting bool
	// probing is set while a probe runs: one replica has at most one probe
	// in flight, and the next is armed when its result arrives.
	probing bool
	// retryAt holds back the next driver call after a failed stop or
	// delete (the sweep timer comes then).
	retryAt time.Time
	// restartArmed: the current run's watch authorizes the driver to
	// restart it at once (PERF-1); reinspect: an inspection in flight
	// predates such a restart, and its answer is not to be believed.
	restartArmed bool
	reinspect    bool
	// recheck: a delete of a retiring instance failed; before it is tried
	// again the instance is inspected, since the failure may mean it runs
	// again (seen when the stop raced an incusd restart) and must be
	// stopped first (SVC-33).
	recheck, rechecking bool
	// Replace is set when the slot must get a fresh instance (SVC-8, SUP-15).
	Replace   bool
	LastError string
	LastExit  *drivers.Exit
	Done      bool

	// Pid and Generation are the current run's, as last observed (SVC-31).
	Pid        int
	Generation string
	// Withdraw: a touch waits for the service's withdrawal (SVC-30);
	// withdrawn: the service has withdrawn it since it last served.
	Withdraw  bool
	withdrawn bool
	// verify: a ready probe waits for an inspection before the instance
	// is published; verifying: that inspection is in flight (SVC-31).
	verify    bool
	verifying bool
	// Refused: the instance is in a state recovery refuses to act on
	// (SVC-32). RetireError: why retiring it last failed (SVC-33).
	Refused     string
	RetireError string
}

// Events are Begin and the replica's messages: messages.ReplicaOpDone,
// ReplicaExited, ReplicaProbed, ReplicaCommand, ReplicaRetry and its
// timers' messages.Timer.
type Event = any

// Begin starts the replica; Adopt is the observed instance when adopting.
type Begin struct{ Adopt *drivers.Status }

// WatchLost: the shell could not arm the restart watch it was asked for
// (the driver refused the watch); no restart at once is authorized.
type WatchLost struct{}

type (
	OpDone  = messages.ReplicaOpDone
	Exited  = messages.ReplicaExited
	Probed  = messages.ReplicaProbed
	Tick    = messages.Timer
	Command = messages.ReplicaCommand
	// Sweep: the service's sweep asks for an inspection now.
	Sweep = messages.ReplicaSweep
)

// The replica's own effects; the shared ones (step.Arm, step.Emit,
// step.End) come from messages/step.
type (
	// DoOp runs one driver call; Grace is the stop's grace period.
	DoOp struct {
		step.Is
		Op    Op
		Grace time.Duration
	}
	// DoProbe runs one health probe.
	DoProbe struct{ step.Is }
	// StartWatch (re)starts the driver's watch of the instance's run;
	// Restart authorizes the driver to restart the run at once when it
	// fails (drivers.RestartWatcher, PERF-1).
	StartWatch struct {
		step.Is
		Restart bool
	}
	// FetchOutput keeps the tail of a failed run's output (SVC-21).
	FetchOutput struct{ step.Is }
)

// Step folds one event into the state and returns the effects to perform.
// It works on its own copies of cfg and s: the helpers below take them by
// pointer, so a step's frames stay small (State is some 700 bytes, and a
// chain of helpers taking and returning it by value grew each actor
// goroutine's stack to 32 KiB, copied at every step: PERF-3).
func Step(cfg Config, s State, e Event, now time.Time) (State, []step.Effect) {
	fx := apply(&cfg, &s, e, now)
	return s, fx
}

func apply(cfg *Config, s *State, e Event, now time.Time) []step.Effect {
	var fx []step.Effect
	switch e := e.(type) {
	case Begin:
		fx = begin(cfg, s, e, now)
	case OpDone:
		fx = opDone(cfg, s, e, now)
	case Exited:
		fx = exited(cfg, s, e, now)
	case Probed:
		fx = probed(cfg, s, e, now)
	case Tick:
		fx = tick(cfg, s, e, now)
	case Sweep:
		fx = inspectNow(s)
	case Command:
		command(s, e, now)
	case messages.ReplicaRetry:
		retry(s, now)
	case Withdrawn:
		withdrawnDone(s, e)
	case WatchLost:
		s.restartArmed = false
	default:
		return nil
	}
	return append(fx, settle(cfg, s, now)...)
}

func begin(cfg *Config, s *State, e Begin, now time.Time) []step.Effect {
	if s.Intent == "" {
		s.Intent = messages.IntentRun
	}
	if e.Adopt == nil {
		s.Phase = PhaseCreating
		return nil
	}
	s.Created = true
	s.Phase = PhaseAdopting
	return observe(cfg, s, *e.Adopt, now, true)
}

func opDone(cfg *Config, s *State, e OpDone, now time.Time) []step.Effect {
	if e.Op != s.Op {
		return nil
	}
	s.Op = OpNone
	switch e.Op {
	case OpCreate:
		if e.Err != nil {
			return opFailed(cfg, s, e, now)
		}
		s.Created, s.CreatedAt = true, now
		return nil
	case OpStart:
		if e.Err != nil {
			s.LastError = e.Err.Error()
			s.afterFailedStart = true
		} else {
			s.startPending = true
			s.Entry = ladder.Started(s.Entry)
		}
		s.Op, s.restartArmed = OpInspect, false
		return []step.Effect{StartWatch{}, DoOp{Op: OpInspect}}
	case OpInspect:
		if s.reinspect {
			// Asked before the driver restarted the run: ask again.
			s.reinspect, s.verifying, s.verify = false, false, false
			s.Op = OpInspect
			return []step.Effect{DoOp{Op: OpInspect}}
		}
		if s.verifying {
			s.verifying = false
			return verified(cfg, s, e, now)
		}
		if s.rechecking {
			s.rechecking = false
			return rechecked(cfg, s, e, now)
		}
		if e.Err != nil {
			return inspectFailed(cfg, s, e, now)
		}
		// A restarted replica actor adopts its instance by this inspection
		// (SUP-9): found stopped, it is charged and started again like any
		// adopted run, not left adopting.
		return observe(cfg, s, e.Status, now, s.Phase == PhaseAdopting)
	case OpStop:
		if e.Err != nil && !errors.Is(e.Err, drivers.ErrNotFound) {
			return opFailed(cfg, s, e, now)
		}
		down(s)
		s.healthRestart = false
		if errors.Is(e.Err, drivers.ErrNotFound) {
			return missing(s)
		}
		return nil
	case OpDelete:
		if e.Err != nil && !errors.Is(e.Err, drivers.ErrNotFound) {
			return opFailed(cfg, s, e, now)
		}
		s.Created = false
		return nil
	}
	return nil
}

// opFailed handles a failed create, stop or delete. A transient error
// changes nothing but a later retry (SVC-8); another charges the ladder.
func opFailed(cfg *Config, s *State, e OpDone, now time.Time) []step.Effect {
	s.LastError = fmt.Sprintf("%s: %v", e.Op, e.Err)
	if e.Op != OpCreate && retiring(s) {
		s.RetireError = s.LastError // SVC-33: the service records it
		s.recheck = e.Op == OpDelete
	}
	if errors.Is(e.Err, drivers.ErrTransient) || e.Op != OpCreate {
		s.retryAt = now.Add(cfg.Policy.TransientRetry)
		return retryLater(cfg, now)
	}
	return charge(cfg, s, now, s.LastError)
}

func retryLater(cfg *Config, now time.Time) []step.Effect {
	return []step.Effect{step.Arm{Timer: TimerSweep, At: now.Add(cfg.Policy.TransientRetry)}}
}

func inspectFailed(cfg *Config, s *State, e OpDone, now time.Time) []step.Effect {
	if errors.Is(e.Err, drivers.ErrNotFound) {
		return missing(s)
	}
	// A transient error (or a timeout) changes nothing (SVC-8).
	s.LastError = fmt.Sprintf("inspect: %v", e.Err)
	return retryLater(cfg, now)
}

// missing: the instance is confirmed gone. It is withdrawn from traffic and
// the service fills the slot with a fresh instance, never under this one's
// identity (SVC-8).
func missing(s *State) []step.Effect {
	down(s)
	s.Created = false
	s.Replace = true
	return []step.Effect{step.Emit{Kind: messages.KindReplicaReplaced, Level: messages.LevelWarn, Message: "instance is missing; the slot gets a fresh one"}}
}

// observe applies what the driver reports about the instance.
func observe(cfg *Config, s *State, st drivers.Status, now time.Time, adopting bool) []step.Effect {
	s.Addresses = st.Addresses
	afterFailed, ours := s.afterFailedStart, s.startPending
	s.afterFailedStart, s.startPending = false, false
	wasRefused := s.Refused
	if cfg.Policy.FailClosed && unsafe(st.State) {
		// Paused, unknown or no state: refused, not repaired (SVC-32).
		return refuse(cfg, s, st, now, wasRefused)
	}
	s.Refused = ""
	if wasRefused != "" && st.State == drivers.StateRunning {
		s.StartedAt = time.Time{} // back from a refused state: verified afresh
	}
	switch st.State {
	case drivers.StateRunning:
		return observeRunning(cfg, s, st, now, adopting, ours, afterFailed)
	case drivers.StateStopped:
		if s.Running || ours || afterFailed || adopting {
			reason := "found stopped"
			if st.ExitCode > 0 {
				reason = fmt.Sprintf("found stopped, exit code %d", st.ExitCode)
			}
			if afterFailed {
				reason = s.LastError
			}
			down(s)
			s.restarting = false
			fx := []step.Effect{FetchOutput{}}
			return append(fx, charge(cfg, s, now, reason)...)
		}
		return nil
	default:
		// starting, restarting, paused, unknown: observed, not acted on.
		if adopting {
			s.Phase = PhaseAdopting
		}
		return []step.Effect{step.Arm{Timer: TimerSweep, At: now.Add(time.Second)}}
	}
}

func observeRunning(cfg *Config, s *State, st drivers.Status, now time.Time, adopting, ours, afterFailed bool) []step.Effect {
	if !(s.Running && st.StartedAt.Equal(s.StartedAt)) {
		s.Pid, s.Generation = st.Pid, generation(st) // a new run (SVC-31)
	}
	switch {
	case s.Running && st.StartedAt.Equal(s.StartedAt):
		return nil // nothing new
	case s.Running && !ours && s.restartArmed:
		// Most likely the restart at once this replica authorized, whose
		// exit is on its way: the exit does the accounting.
		return nil
	case s.Running && !ours:
		// Restarted by something else (SVC-9): out of rotation until it is
		// verified healthy again. Its end is watched like any run's.
		fx := []step.Effect{StartWatch{}, step.Emit{Kind: messages.KindReplicaRestarted, Level: messages.LevelWarn, Message: "instance restarted outside engenho; verifying it before it serves again"}}
		run(cfg, s, st.StartedAt, now)
		if !cfg.Probe.Enabled() {
			fx = append(fx, observeStable(cfg, s, now, true)...)
		}
		return append(fx, probeNow(s, now)...)
	}
	// Our own start, an adoption, or a failed start that something else
	// fixed (charge nothing, SVC-8).
	_ = afterFailed
	run(cfg, s, st.StartedAt, now)
	// Every run this incarnation learns of is watched, adopted or not: a
	// replica actor restarted (SUP-9) finds its instance by inspecting it,
	// and without a watch of its own it would learn of an exit only from
	// a sweep, or later still when that inspection fails. The watch
	// authorizes the driver to restart the run at once when the policy
	// would (PERF-1).
	s.restartArmed = restartAhead(cfg, s)
	fx := []step.Effect{StartWatch{Restart: s.restartArmed}}
	if s.restarting {
		s.restarting = false
		fx = append(fx, step.Emit{Kind: messages.KindReplicaRestarted, Level: messages.LevelInfo,
			Message: fmt.Sprintf("restarted by engenho; running again (restart %d)", s.Restarts)})
	}
	if !cfg.Probe.Enabled() {
		// In rotation while it runs: its stable window starts now (SUP-11).
		fx = append(fx, observeStable(cfg, s, now, true)...)
	}
	return append(fx, probeNow(s, now)...)
}

// run records a running instance whose run began at startedAt. Its start
// period counts from startedAt, or from now if the driver's wall time for
// it lies ahead (a clock stepped back since).
func run(cfg *Config, s *State, startedAt, now time.Time) {
	s.Running, s.StartedAt, s.RunSeen = true, startedAt, now
	s.Health = probe.NewTracker(cfg.Probe, earliest(startedAt, now))
	s.InRotation, s.ServingSince = false, time.Time{}
	s.Phase = PhaseProbing
	if !cfg.Probe.Enabled() {
		s.Phase = PhaseServing
		published(s, now)
	}
}

func probeNow(s *State, now time.Time) []step.Effect {
	if !s.Health.Config.Enabled() || s.probing {
		return nil
	}
	return []step.Effect{step.Arm{Timer: TimerProbe, At: probe.NextProbe(s.Health, now)}}
}

// down marks the instance not running and out of rotation.
func down(s *State) {
	s.Running, s.InRotation, s.ServingSince = false, false, time.Time{}
	if s.Phase != PhaseFailed {
		s.Phase = PhaseDown
	}
}

func exited(cfg *Config, s *State, e Exited, now time.Time) []step.Effect {
	if !s.Running || s.Op == OpStop {
		return nil // already known, or the end of our own stop
	}
	ex := e.Exit
	if ex.Restarted && ex.At.Before(s.StartedAt) {
		// The end of a run before the current one: an inspection saw it
		// stopped first and it was accounted then.
		return nil
	}
	s.LastExit = &ex
	down(s)
	s.restartArmed = false
	fx := []step.Effect{FetchOutput{}}
	if s.Op == OpInspect {
		s.startPending = false
	}
	fx = append(fx, chargeExit(cfg, s, ex, now)...)
	if ex.Restarted {
		fx = append(fx, restartedByDriver(s)...)
	}
	return fx
}

// restartAhead reports whether the driver may restart the current run at
// once when it fails (PERF-1): exactly when this replica would restart it
// at once itself, by its restart policy and its ladder, needing no
// withdrawal first (SVC-30). The decision is the one charge and settle
// would make at the next failure; a later change that could make it wrong
// (a stop, a health restart, a replacement) goes through the driver's
// Stop, which withdraws the authorization.
func restartAhead(cfg *Config, s *State) bool {
	p := cfg.Policy
	if !p.DriverRestarts || !s.Running || p.Condition == "none" || p.MaxAttempts > 0 {
		return false
	}
	if p.FailClosed && !p.NoRotation {
		return false // the restart waits for the service's withdrawal
	}
	if s.Intent != messages.IntentRun || s.Replace || s.healthRestart || s.Refused != "" || s.Done {
		return false
	}
	failures := 0
	if s.HasEntry {
		failures = s.Entry.Failures
	}
	return cfg.Ladder.Delay(failures+1) == 0 && cfg.Policy.Delay <= 0
}

// restartedByDriver takes a restart the driver made at once, as this
// replica authorized (PERF-1): counted as settle counts its own restarts
// and looked at as after a start call of its own.
func restartedByDriver(s *State) []step.Effect {
	s.Restarts++
	s.restarting, s.startPending = true, true
	s.Entry = ladder.Started(s.Entry)
	s.Phase = PhaseStarting
	fx := []step.Effect{StartWatch{}}
	if s.Op != OpNone {
		s.reinspect = true // its answer may be from before the restart
		return fx
	}
	s.Op = OpInspect
	return append(fx, DoOp{Op: OpInspect})
}

// leftDown is the fingerprint of replica.restart_limit: the instance is
// left down, whatever the policy said; a replica that adopts it again
// after a restart says so only once (SVC-26).
const leftDown = "left down by its restart policy"

func chargeExit(cfg *Config, s *State, ex drivers.Exit, now time.Time) []step.Effect {
	reason := ex.Describe() // the driver's reason first: "oom-killed (limit 64 MiB)" (DRV-14)
	if cfg.Policy.Condition == "on-failure" && ex.ExitCode == 0 && ex.Signal == "" {
		s.Phase = PhaseFailed
		s.LastError = "exited cleanly; restart policy on-failure leaves it down"
		return []step.Effect{step.Emit{Kind: messages.KindReplicaLimit, Fingerprint: leftDown, Level: messages.LevelInfo, Message: s.LastError}}
	}
	return charge(cfg, s, now, reason)
}

// charge counts one failure against the restart policy and the ladder and
// sets when the next attempt may run (SUP-10, SUP-12, SUP-16). The reason
// is the replica's last error from here on: status shows it (SVC-19).
func charge(cfg *Config, s *State, now time.Time, reason string) []step.Effect {
	s.LastError = reason
	if cfg.Policy.Condition == "none" {
		s.Phase = PhaseFailed
		s.LastError = "restart policy none leaves it down: " + reason
		return []step.Effect{step.Emit{Kind: messages.KindReplicaLimit, Fingerprint: leftDown, Level: messages.LevelWarn, Message: s.LastError}}
	}
	if limit(cfg.Policy, s, now) {
		s.Phase = PhaseFailed
		s.LastError = "restart limit reached: " + reason
		return []step.Effect{step.Emit{Kind: messages.KindReplicaLimit, Fingerprint: leftDown, Level: messages.LevelError, Message: s.LastError}}
	}
	var d ladder.Decision
	s.Entry, d = ladder.Fail(cfg.Ladder, s.Entry, now, reason, nil)
	if floor := now.Add(cfg.Policy.Delay); d.At.Before(floor) {
		d.At, s.Entry.NextAttempt = floor, floor // restart_policy.delay
	}
	s.HasEntry = true
	s.NextAttempt = d.At
	msg := fmt.Sprintf("%s; failure %d, next attempt %s", reason, d.Failures, d.At.UTC().Format(time.RFC3339))
	return []step.Effect{step.Emit{Kind: messages.KindReplicaFailed, Level: messages.LevelWarn, Message: msg}}
}

// limit applies max_attempts within window (SUP-16).
func limit(p Policy, s *State, now time.Time) bool {
	if p.MaxAttempts <= 0 {
		return false
	}
	keep := s.Attempts[:0:0]
	for _, t := range s.Attempts {
		if p.Window <= 0 || now.Sub(t) < p.Window {
			keep = append(keep, t)
		}
	}
	if len(keep) >= p.MaxAttempts {
		s.Attempts = keep
		return true
	}
	s.Attempts = append(keep, now)
	return false
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func probed(cfg *Config, s *State, e Probed, now time.Time) []step.Effect {
	s.probing = false
	if !s.Running || s.Op == OpStop || e.Result.At.Before(s.RunSeen) {
		return nil
	}
	s.Health, _ = probe.Observe(s.Health, e.Result, now)
	var fx []step.Effect
	switch s.Health.Status {
	case probe.StatusHealthy:
		s.HealthRestarts = 0
		if !s.InRotation && cfg.Policy.FailClosed {
			// Ready, but published only once an inspection shows the same
			// run (SVC-31); settle starts it.
			s.verify = true
			return nil
		}
		if !s.InRotation {
			published(s, now)
		}
		s.Phase = PhaseServing
		fx = observeStable(cfg, s, now, true)
	case probe.StatusUnhealthy:
		s.InRotation, s.ServingSince = false, time.Time{}
		s.Phase = PhaseUnhealthy
		fx = observeStable(cfg, s, now, false)
		if s.Health.UnhealthyObservations >= threshold(cfg.Policy) {
			return append(fx, healthRestart(cfg, s, now)...)
		}
	}
	return append(fx, probeNow(s, now)...)
}

func threshold(p Policy) int {
	if p.UnhealthyThreshold > 0 {
		return p.UnhealthyThreshold
	}
	return probe.RestartThreshold
}

// healthRestart restarts an unhealthy instance, or asks for a fresh one
// after too many restarts that did not make it healthy (SUP-15).
func healthRestart(cfg *Config, s *State, now time.Time) []step.Effect {
	if cfg.Policy.Condition == "none" {
		return nil // never restarted: it stays up, out of rotation
	}
	if s.HealthRestarts >= cfg.Policy.RestartsBeforeReplace {
		s.Replace = true
		return []step.Effect{step.Emit{Kind: messages.KindReplicaReplaced, Level: messages.LevelWarn,
			Message: fmt.Sprintf("restarted %d times for being unhealthy without becoming healthy; replacing it", s.HealthRestarts)}}
	}
	s.HealthRestarts++
	s.healthRestart = true
	return charge(cfg, s, now, "unhealthy: "+s.Health.Last.Output)
}

// observeStable feeds the ladder's stability window (SUP-11).
func observeStable(cfg *Config, s *State, now time.Time, stable bool) []step.Effect {
	if !s.HasEntry {
		return nil
	}
	var reset bool
	s.Entry, reset = ladder.Observe(cfg.Ladder, s.Entry, now, stable)
	if reset {
		s.Entry, s.HasEntry = messages.Ledger{}, false
		if !s.restartArmed && restartAhead(cfg, s) {
			// A fresh ladder restarts at once again.
			s.restartArmed = true
			return []step.Effect{StartWatch{Restart: true}}
		}
		return nil
	}
	if stable {
		return []step.Effect{step.Arm{Timer: TimerStable, At: s.Entry.StableSince.Add(cfg.Ladder.Stable)}}
	}
	return nil
}

func tick(cfg *Config, s *State, e Tick, now time.Time) []step.Effect {
	switch e.Name {
	case TimerProbe:
		if s.Running && s.Op == OpNone && s.Health.Config.Enabled() && !s.probing {
			s.probing = true
			return []step.Effect{DoProbe{}}
		}
	case TimerSweep:
		return inspectNow(s)
	case TimerStable:
		if s.Running && s.InRotation {
			return observeStable(cfg, s, now, true)
		}
	}
	return nil
}

// inspectNow inspects the instance unless a driver call is in flight
// (its own inspection follows) or it is being retired.
func inspectNow(s *State) []step.Effect {
	if s.Op == OpNone && s.Created && (s.Intent != messages.IntentRetire || s.Refused != "") {
		s.Op = OpInspect
		return []step.Effect{DoOp{Op: OpInspect}}
	}
	return nil
}

func command(s *State, e Command, now time.Time) {
	prev := s.Intent
	s.Intent = e.Intent
	if e.Intent != messages.IntentRun {
		s.InRotation, s.ServingSince = false, time.Time{}
	}
	if e.Intent == messages.IntentRun && prev != messages.IntentRun {
		// An operator's start lifts a stop and a spent restart policy.
		s.Attempts, s.NextAttempt = nil, now
		if s.Phase == PhaseFailed || s.Phase == PhaseStopped {
			s.Phase = PhaseDown
		}
	}
}

// retry clears the backoff and a spent restart policy (SUP-17).
func retry(s *State, now time.Time) {
	s.Entry, s.HasEntry = messages.Ledger{}, false
	s.Attempts, s.NextAttempt = nil, now
	if s.Phase == PhaseFailed {
		s.Phase = PhaseDown
	}
}

// settle starts the next driver call the state calls for, if none is in
// flight, and arms the restart timer while one is pending.
func settle(cfg *Config, s *State, now time.Time) []step.Effect {
	if s.Op != OpNone || s.Done || now.Before(s.retryAt) || s.Refused != "" {
		return nil // SVC-32: a refused instance is not touched
	}
	switch {
	case s.Replace && s.Created && needsWithdraw(cfg, s):
		s.Phase = PhaseRetiring
		return nil // SVC-30: withdrawn before it is replaced
	case s.Intent == messages.IntentRetire || s.Replace:
		return retire(cfg, s)
	case s.Intent == messages.IntentStop:
		if s.Running {
			s.Phase, s.Op = PhaseStopping, OpStop
			return []step.Effect{DoOp{Op: OpStop, Grace: cfg.Policy.StopGrace}}
		}
		s.Phase = PhaseStopped
		return nil
	}
	if s.Running && s.healthRestart {
		if needsWithdraw(cfg, s) {
			// SVC-30: withdrawn before it is restarted. The withdrawal is
			// the stop's first step, so it shows as stopping, as without it.
			s.Phase = PhaseStopping
			return nil
		}
		// Kept until the stop succeeds: a stop that failed is tried again.
		s.Phase, s.Op = PhaseStopping, OpStop
		return []step.Effect{DoOp{Op: OpStop, Grace: cfg.Policy.StopGrace}}
	}
	if s.Running && s.verify {
		s.Op, s.verifying = OpInspect, true
		return []step.Effect{DoOp{Op: OpInspect}}
	}
	if s.Running {
		return append(sweep(cfg, now), keepProbing(s, now)...)
	}
	if s.Phase == PhaseFailed || s.Phase == PhaseAdopting {
		return nil
	}
	if now.Before(s.NextAttempt) {
		s.Phase = PhaseDown
		return []step.Effect{step.Arm{Timer: TimerRestart, At: s.NextAttempt}}
	}
	if !s.Created {
		s.Phase, s.Op = PhaseCreating, OpCreate
		return []step.Effect{DoOp{Op: OpCreate}}
	}
	if s.Phase == PhaseDown && s.StartedAt != (time.Time{}) && needsWithdraw(cfg, s) {
		return nil // SVC-30: a dead instance is withdrawn before it is restarted
	}
	if s.Phase == PhaseDown && s.StartedAt != (time.Time{}) {
		s.Restarts++
		s.restarting = true
	}
	s.Phase, s.Op = PhaseStarting, OpStart
	return []step.Effect{DoOp{Op: OpStart}}
}

// keepProbing keeps a probe armed while the instance runs: a probe due
// while a driver call was in flight is not lost.
func keepProbing(s *State, now time.Time) []step.Effect {
	if !s.Health.Config.Enabled() || s.probing {
		return nil
	}
	return []step.Effect{step.Arm{Timer: TimerProbe, At: probe.NextProbe(s.Health, now), Keep: true}}
}

// sweep keeps a periodic inspection of a running instance armed, which
// catches a start time that changed behind engenho's back (SVC-9).
func sweep(cfg *Config, now time.Time) []step.Effect {
	if cfg.Policy.Sweep <= 0 || cfg.Policy.ListSwept {
		return nil
	}
	return []step.Effect{step.Arm{Timer: TimerSweep, At: now.Add(cfg.Policy.Sweep), Keep: true}}
}

// rechecked takes the inspection made before a failed delete is tried
// again: an instance that runs again is stopped first, one that is gone
// ends the retirement, an unsafe one is refused (SVC-32, SVC-33). It is
// never published: the instance is retiring.
func rechecked(cfg *Config, s *State, e OpDone, now time.Time) []step.Effect {
	if errors.Is(e.Err, drivers.ErrNotFound) {
		down(s)
		s.Created = false
		return nil
	}
	if e.Err != nil {
		s.recheck = true
		s.LastError = fmt.Sprintf("inspect before deleting again: %v", e.Err)
		s.retryAt = now.Add(cfg.Policy.TransientRetry)
		return retryLater(cfg, now)
	}
	if cfg.Policy.FailClosed && unsafe(e.Status.State) {
		return refuse(cfg, s, e.Status, now, s.Refused)
	}
	if e.Status.State != drivers.StateStopped {
		s.Running, s.StartedAt, s.Pid = true, e.Status.StartedAt, e.Status.Pid
	}
	return nil
}

// retire stops and deletes the instance, then ends the actor (SVC-16).
func retire(cfg *Config, s *State) []step.Effect {
	s.InRotation = false
	switch {
	case s.recheck && s.Created:
		s.recheck, s.rechecking = false, true
		s.Phase, s.Op = PhaseRetiring, OpInspect
		return []step.Effect{DoOp{Op: OpInspect}}
	case s.Running:
		s.Phase, s.Op = PhaseRetiring, OpStop
		return []step.Effect{DoOp{Op: OpStop, Grace: cfg.Policy.StopGrace}}
	case s.Created:
		s.Phase, s.Op = PhaseRetiring, OpDelete
		return []step.Effect{DoOp{Op: OpDelete}}
	}
	s.Phase, s.Done = PhaseGone, true
	return []step.Effect{step.End{}}
}
