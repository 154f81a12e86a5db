package sidecar

import (
	"fmt"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Config is what the core needs of a sidecar's definition.
type Config struct {
	// Name is the sidecar's name; its events' messages begin with it.
	Name     string
	AlwaysOn bool
	MaxRun   time.Duration
	Backoff  stackfile.SidecarBackoff
}

// ConfigOf reads a sidecar definition.
func ConfigOf(sc stackfile.Sidecar) Config {
	return Config{Name: sc.Name, AlwaysOn: sc.AlwaysOn, MaxRun: sc.MaxRun, Backoff: sc.Backoff}
}

// Op is a driver operation the shell runs.
type Op string

const (
	OpNone Op = ""
	// OpCleanup stops and deletes instances an earlier incarnation left.
	OpCleanup Op = "cleanup"
	// OpStart creates the instance if needed and starts a run.
	OpStart Op = "start"
	// OpStop stops the run (SIGTERM, grace, kill) and deletes the instance.
	OpStop Op = "stop"
)

// Timer names.
const (
	TimerRestart = "restart"
	TimerMaxRun  = "max_run"
)

// State is a sidecar's state; the zero value is before Begin.
type State struct {
	Phase     messages.SidecarPhase
	Op        Op
	StartedAt time.Time
	// NextDelay is the backoff before the next restart after a crash.
	NextDelay time.Duration
	Restarts  int
	ExitCode  int
	// Recycling: the run is being stopped for max_run; start again at once.
	Recycling bool
	// StopAsked: the host (or the shutdown) asked it to stop and end.
	StopAsked bool
	Unproven  bool
	LastErr   string
	Ended     bool
}

// Events.
type (
	// Begin: the actor started.
	Begin struct{}
	// OpDone: an operation ended; Err is empty on success.
	OpDone struct {
		Op  Op
		Err string
	}
	// Exited: the current run ended.
	Exited struct {
		Code   int
		Signal string
	}
	// Timer: the timer Name fired.
	Timer struct{ Name string }
	// Stop: stop the process and end.
	Stop struct{}
)

// Do runs Op in a goroutine; OpDone follows. It is the sidecar core's
// only own effect; the shared ones are step.Arm, step.Cancel, step.Emit
// and step.End.
type Do struct {
	step.Is
	Op Op
}

// Step applies one event.
func Step(cfg Config, s State, e any, now time.Time) (State, []step.Effect) {
	if s.Ended {
		return s, nil
	}
	switch e := e.(type) {
	case Begin:
		s.Phase, s.Op, s.NextDelay = messages.SidecarStarting, OpCleanup, cfg.Backoff.Initial
		return s, []step.Effect{Do{Op: OpCleanup}}
	case OpDone:
		return opDone(cfg, s, e, now)
	case Exited:
		return exited(cfg, s, e, now)
	case Timer:
		return timer(cfg, s, e)
	case Stop:
		return stop(s)
	}
	return s, nil
}

func opDone(cfg Config, s State, e OpDone, now time.Time) (State, []step.Effect) {
	if e.Op != s.Op {
		return s, nil
	}
	s.Op = OpNone
	switch e.Op {
	case OpCleanup:
		if e.Err != "" {
			s.LastErr = e.Err
		}
		if s.StopAsked {
			return stopNow(s)
		}
		return start(s)
	case OpStart:
		if s.StopAsked {
			return stopNow(s)
		}
		if e.Err != "" {
			s.LastErr = e.Err
			return crashed(cfg, s, now, "start failed: "+e.Err)
		}
		s.Phase, s.StartedAt, s.LastErr = messages.SidecarRunning, now, ""
		if cfg.MaxRun > 0 {
			return s, []step.Effect{step.Arm{Timer: TimerMaxRun, At: now.Add(cfg.MaxRun)}}
		}
		return s, nil
	case OpStop:
		if e.Err != "" && !s.StopAsked && s.Recycling {
			// The recycle's stop failed: the run goes on; try again soon.
			s.Recycling, s.Phase, s.LastErr = false, messages.SidecarRunning, e.Err
			return s, []step.Effect{step.Arm{Timer: TimerMaxRun, At: now.Add(cfg.Backoff.Initial)}}
		}
		if e.Err != "" {
			// Not proven exited: keep trying when asked again (ACT-8).
			s.Unproven, s.LastErr = true, e.Err
			return s, []step.Effect{emit(cfg, messages.KindHostStopPending, messages.LevelWarn, "sidecar stop not proven: "+e.Err)}
		}
		s.Unproven = false
		if s.StopAsked {
			s.Phase, s.Ended = messages.SidecarStopped, true
			return s, []step.Effect{step.End{}}
		}
		if s.Recycling {
			s.Recycling = false
			s.Restarts++
			return start(s)
		}
		s.Phase = messages.SidecarStopped
		return s, nil
	}
	return s, nil
}

func start(s State) (State, []step.Effect) {
	s.Phase, s.Op = messages.SidecarStarting, OpStart
	return s, []step.Effect{Do{Op: OpStart}}
}

func stopNow(s State) (State, []step.Effect) {
	s.Phase, s.Op = messages.SidecarStopping, OpStop
	return s, []step.Effect{step.Cancel{Timer: TimerRestart}, step.Cancel{Timer: TimerMaxRun}, Do{Op: OpStop}}
}

func exited(cfg Config, s State, e Exited, now time.Time) (State, []step.Effect) {
	if s.Phase != messages.SidecarRunning || s.Op != OpNone {
		return s, nil // a stop under way reports through OpDone
	}
	s.ExitCode = e.Code
	fx := []step.Effect{step.Cancel{Timer: TimerMaxRun}}
	if e.Code == 0 && e.Signal == "" && !cfg.AlwaysOn {
		s.Phase = messages.SidecarDone
		return s, append(fx, emit(cfg, messages.KindSidecarDone, messages.LevelInfo, "exited 0: work done"))
	}
	why := fmt.Sprintf("exited %d", e.Code)
	if e.Signal != "" {
		why = "ended by " + e.Signal
	}
	s, more := crashed(cfg, s, now, why)
	return s, append(fx, more...)
}

// crashed schedules a restart on the doubling backoff (ACT-11): a run of
// reset_after or more starts it again from the initial delay.
func crashed(cfg Config, s State, now time.Time, why string) (State, []step.Effect) {
	if !s.StartedAt.IsZero() && now.Sub(s.StartedAt) >= cfg.Backoff.ResetAfter {
		s.NextDelay = cfg.Backoff.Initial
	}
	if s.NextDelay <= 0 {
		s.NextDelay = cfg.Backoff.Initial
	}
	delay := s.NextDelay
	s.NextDelay = min(2*s.NextDelay, cfg.Backoff.Cap)
	s.Restarts++
	s.Phase, s.StartedAt = messages.SidecarBackoff, time.Time{}
	return s, []step.Effect{
		step.Arm{Timer: TimerRestart, At: now.Add(delay)},
		emit(cfg, messages.KindSidecarRestarted, messages.LevelWarn, fmt.Sprintf("%s; restart %d in %s", why, s.Restarts, delay)),
	}
}

func timer(cfg Config, s State, e Timer) (State, []step.Effect) {
	switch e.Name {
	case TimerRestart:
		if s.Phase == messages.SidecarBackoff && s.Op == OpNone && !s.StopAsked {
			return start(s)
		}
	case TimerMaxRun:
		if s.Phase == messages.SidecarRunning && s.Op == OpNone && !s.StopAsked {
			s.Recycling, s.Phase, s.Op = true, messages.SidecarStopping, OpStop
			return s, []step.Effect{
				emit(cfg, messages.KindSidecarRecycled, messages.LevelInfo, fmt.Sprintf("ran %s (max_run): recycling", cfg.MaxRun)),
				Do{Op: OpStop},
			}
		}
	}
	return s, nil
}

func stop(s State) (State, []step.Effect) {
	s.StopAsked = true
	if s.Op != OpNone && s.Op != OpStop {
		return s, nil // stopped when the operation ends
	}
	if s.Op == OpStop {
		s.Recycling = false
		return s, nil // already stopping
	}
	return stopNow(s)
}

// emit is an event about the sidecar: its message begins with its name.
func emit(cfg Config, kind string, level messages.Level, msg string) step.Emit {
	if cfg.Name != "" {
		msg = cfg.Name + ": " + msg
	}
	return step.Emit{Kind: kind, Level: level, Message: msg}
}
