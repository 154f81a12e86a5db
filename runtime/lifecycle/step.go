package lifecycle

import (
	"fmt"

	"github.com/engenho/engenho/messages/step"
)

// Step applies event e to state s. It returns the next state and the
// effects the loop must perform: none or one of the lifecycle's own. A
// refused event returns s unchanged and one step.Refuse with the reason
// (Refusal turns it into the answer the operator gets).
func Step(s State, e Event) (State, []step.Effect) {
	if e == nil {
		return refuse(s, e, "no event")
	}
	switch s.Name {
	case Resolving:
		return stepResolving(s, e)
	case Booting:
		return stepBooting(s, e)
	case Running:
		return stepRunning(s, e)
	case Draining:
		return stepDraining(s, e)
	case Stopped:
		return stepStopped(s, e)
	case Failed:
		return stepFailed(s, e)
	case Wedged:
		return stepWedged(s, e)
	case Exiting:
		return refuse(s, e, "the daemon is exiting")
	}
	return refuse(s, e, fmt.Sprintf("unknown state %q", s.Name))
}

func refuse(s State, _ Event, reason string) (State, []step.Effect) {
	return s, []step.Effect{step.Refuse{Reason: reason}}
}

// doesNotApply is the reason for an event that has no meaning in s.
func doesNotApply(s State, e Event) (State, []step.Effect) {
	return refuse(s, e, fmt.Sprintf("%s does not apply while %s", e, s.Name))
}

func stepResolving(s State, e Event) (State, []step.Effect) {
	switch e.(type) {
	case BootRequested:
		return accept(boot(s))
	case HoldPresent:
		s.Name, s.Hold = Stopped, true
		return s, nil
	case ExitRequested:
		return accept(land(s, TargetExit))
	}
	return refuse(s, e, "the daemon has not decided whether to boot yet")
}

func stepBooting(s State, e Event) (State, []step.Effect) {
	switch e := e.(type) {
	case PhaseDone:
		if e.Phase != s.Phase {
			return refuse(s, e, fmt.Sprintf("the current phase is %s", s.Phase))
		}
		return accept(phaseDone(s))
	case PhaseFailed:
		if e.Phase != s.Phase {
			return refuse(s, e, fmt.Sprintf("the current phase is %s", s.Phase))
		}
		if !classAllowed(e.Phase, e.Class) {
			return refuse(s, e, fmt.Sprintf("phase %s cannot fail with cause class %q", e.Phase, e.Class))
		}
		return accept(phaseFailed(s, e))
	case StopRequested:
		return pendStop(s, e)
	case StartRequested:
		if s.Then != TargetStopped {
			return refuse(s, e, "already booting")
		}
		s = setThen(s, TargetNone)
		s.Hold = false
		return s, nil
	case RestartRequested:
		return pendRestart(s, e)
	case ExitRequested:
		return pendExit(s, e)
	case ConfigChanged, ReconfigureRequested:
		s.ConfigStale = true
		return s, nil
	case RootGaveUp:
		if !treeExists(s.Phase) {
			return refuse(s, e, fmt.Sprintf("no supervision tree during %s", s.Phase))
		}
		s.LastError = &Failure{Class: CauseSupervision, Reasons: e.Chain}
		if s.Then == TargetNone || s.Then == TargetFailed {
			s = setThen(s, TargetFailed)
			s.Retry = retryFor(CauseSupervision)
		}
		return s, nil
	case RetryRequested:
		return refuse(s, e, "booting: retry applies to a failed boot")
	}
	return doesNotApply(s, e)
}

// phaseDone ends the current phase: the next phase, running, or the pending
// interruption.
func phaseDone(s State) (State, step.Effect) {
	if s.Then != TargetNone {
		return abortBoot(s)
	}
	if next, ok := nextPhase(s.Phase); ok {
		s.Phase = next
		return s, RunPhase{Phase: next, Attempt: s.Attempt}
	}
	reload := s.ConfigStale
	s = clearTransient(s)
	s.Name = Running
	s.Epoch++
	s.Failures = 0
	s.LastError = nil
	return s, AnnounceRunning{Epoch: s.Epoch, Reload: reload}
}

// phaseFailed records the failure and aborts the boot. A pending stop,
// restart or exit wins over landing in failed.
func phaseFailed(s State, e PhaseFailed) (State, step.Effect) {
	s.LastError = &Failure{Phase: e.Phase, Class: e.Class, Reasons: []string{e.Reason}}
	if s.Then == TargetNone || s.Then == TargetFailed {
		s = setThen(s, TargetFailed)
		s.Retry = retryFor(e.Class)
	}
	return abortBoot(s)
}

// abortBoot leaves booting at a phase boundary towards s.Then: straight
// there if nothing was opened yet, through a drain otherwise.
func abortBoot(s State) (State, step.Effect) {
	if opensSomething(s.Phase) {
		return drain(s, s.Then)
	}
	return land(s, s.Then)
}

func stepRunning(s State, e Event) (State, []step.Effect) {
	switch e := e.(type) {
	case StopRequested:
		s.Hold = e.Hold
		return accept(drain(s, TargetStopped))
	case RestartRequested:
		return accept(drain(s, TargetBoot))
	case ExitRequested:
		return accept(drain(s, TargetExit))
	case ConfigChanged, ReconfigureRequested:
		return s, []step.Effect{ApplyConfig{}}
	case RootGaveUp:
		s.LastError = &Failure{Class: CauseSupervision, Reasons: e.Chain}
		s.Retry = retryFor(CauseSupervision)
		return accept(drain(s, TargetFailed))
	case StartRequested:
		return refuse(s, e, "already running")
	case RetryRequested:
		return refuse(s, e, "running: nothing to retry")
	case ReinitRequested:
		return refuse(s, e, "reinit is allowed only while stopped or failed")
	}
	return doesNotApply(s, e)
}

func stepDraining(s State, e Event) (State, []step.Effect) {
	switch e := e.(type) {
	case DrainDone:
		if s.DrainStep != DrainTree {
			return refuse(s, e, "the tree is already stopped; releasing the journal")
		}
		s.DrainStep = DrainJournal
		return s, []step.Effect{ReleaseJournal{}}
	case DrainFailed:
		if s.DrainStep != DrainTree {
			return refuse(s, e, "the tree is already stopped; releasing the journal")
		}
		return accept(wedge(s, CauseDrain, e.Reason))
	case JournalReleased:
		if s.DrainStep != DrainJournal {
			return refuse(s, e, "the tree is still being stopped")
		}
		return accept(land(s, s.Then))
	case JournalReleaseFailed:
		if s.DrainStep != DrainJournal {
			return refuse(s, e, "the tree is still being stopped")
		}
		return accept(wedge(s, CauseRelease, e.Reason))
	case StopRequested:
		return pendStop(s, e)
	case StartRequested:
		switch s.Then {
		case TargetStopped, TargetFailed:
			s = setThen(s, TargetBoot)
			s.Hold = false
			return s, nil
		case TargetBoot:
			return refuse(s, e, "already restarting")
		}
		return refuse(s, e, "the daemon is exiting")
	case RestartRequested:
		return pendRestart(s, e)
	case RetryRequested:
		if s.Then != TargetFailed {
			return refuse(s, e, "draining: retry applies to a failed boot")
		}
		s = setThen(s, TargetBoot)
		return s, nil
	case ExitRequested:
		return pendExit(s, e)
	case ConfigChanged, ReconfigureRequested:
		if s.Then != TargetFailed {
			return refuse(s, e, "draining: the next boot reads the config")
		}
		s.ConfigStale = true
		return s, nil
	case RootGaveUp:
		return refuse(s, e, "draining: the tree is being stopped")
	}
	return doesNotApply(s, e)
}

// wedge records a failed drain step. A drain towards exit still exits
// (with ExitUnreleased: the next start sees a crash and adopts); any other
// drain stops in wedged, where retry resumes the failed step.
func wedge(s State, class CauseClass, reason string) (State, step.Effect) {
	s.LastError = &Failure{Class: class, Reasons: []string{reason}}
	if s.Then == TargetExit {
		s = clearTransient(s)
		s.Name = Exiting
		return s, Exit{Code: ExitUnreleased}
	}
	s.Name = Wedged
	return s, nil
}

func stepStopped(s State, e Event) (State, []step.Effect) {
	switch e := e.(type) {
	case StartRequested, RestartRequested:
		s.Hold = false
		return accept(boot(s))
	case StopRequested:
		if !e.Hold || s.Hold {
			return refuse(s, e, "already stopped")
		}
		s.Hold = true
		return s, nil
	case ExitRequested:
		return accept(land(s, TargetExit))
	case ReinitRequested:
		return reinit(s, e)
	case ReinitDone:
		return s, nil
	case RetryRequested:
		return refuse(s, e, "stopped: use start")
	case ConfigChanged, ReconfigureRequested:
		return refuse(s, e, "stopped: the next start reads the config")
	}
	return doesNotApply(s, e)
}

func stepFailed(s State, e Event) (State, []step.Effect) {
	switch e := e.(type) {
	case BackoffElapsed:
		if s.Retry != RetryBackoff {
			return refuse(s, e, "held: waiting for a config change or an operator's retry")
		}
		if e.Attempt != s.Attempt {
			return refuse(s, e, fmt.Sprintf("stale timer: the current attempt is %d", s.Attempt))
		}
		return accept(boot(s))
	case RetryRequested, StartRequested, RestartRequested, ConfigChanged, ReconfigureRequested:
		return accept(boot(s))
	case StopRequested:
		s.Hold = e.Hold
		return accept(land(s, TargetStopped))
	case ExitRequested:
		return accept(land(s, TargetExit))
	case ReinitRequested:
		return reinit(s, e)
	case ReinitDone:
		// What the boot failed on was moved aside: boot on the new one.
		return accept(boot(s))
	}
	return doesNotApply(s, e)
}

func stepWedged(s State, e Event) (State, []step.Effect) {
	switch e.(type) {
	case RetryRequested:
		s.Name = Draining
		if s.DrainStep == DrainTree {
			return s, []step.Effect{StartDrain{Budget: s.Config.DrainBudget}}
		}
		return s, []step.Effect{ReleaseJournal{}}
	case ExitRequested:
		s = clearTransient(s)
		s.Name = Exiting
		return s, []step.Effect{Exit{Code: ExitUnreleased}}
	}
	return refuse(s, e, "wedged: the journal could not be released; retry or exit")
}

// reinit checks a reinit against the stop epoch (DMN-14).
func reinit(s State, e ReinitRequested) (State, []step.Effect) {
	if e.Epoch != s.Epoch {
		return refuse(s, e, fmt.Sprintf("the runtime ran since (epoch %d, now %d): nothing moved; run reinit again", e.Epoch, s.Epoch))
	}
	return s, []step.Effect{MoveToAttic{What: e.What}}
}

// pendStop makes booting or draining head for stopped.
func pendStop(s State, e StopRequested) (State, []step.Effect) {
	if s.Then == TargetExit {
		return refuse(s, e, "the daemon is exiting")
	}
	s = setThen(s, TargetStopped)
	s.Hold = s.Hold || e.Hold
	return s, nil
}

// pendRestart makes booting or draining head for a new boot.
func pendRestart(s State, e RestartRequested) (State, []step.Effect) {
	if s.Then == TargetExit {
		return refuse(s, e, "the daemon is exiting")
	}
	s = setThen(s, TargetBoot)
	s.Hold = false
	return s, nil
}

// pendExit makes booting or draining head for exit; the hold is kept, so a
// relaunch honours a stop --hold given before.
func pendExit(s State, e ExitRequested) (State, []step.Effect) {
	if s.Then == TargetExit {
		return refuse(s, e, "already exiting")
	}
	s = setThen(s, TargetExit)
	return s, nil
}

// setThen sets the pending target. Retry only describes a pending failure;
// outside booting, ConfigStale only matters for one too (a boot re-reads the
// config anyway).
func setThen(s State, t Target) State {
	s.Then = t
	if t != TargetFailed {
		s.Retry = ""
		if s.Name != Booting {
			s.ConfigStale = false
		}
	}
	return s
}

// clearTransient drops the fields that only describe booting, draining,
// wedged or failed.
func clearTransient(s State) State {
	s.Phase, s.Then, s.DrainStep, s.Retry, s.RetryDelay, s.ConfigStale = "", TargetNone, "", "", 0, false
	return s
}

// drain enters draining towards t.
func drain(s State, t Target) (State, step.Effect) {
	stale := s.ConfigStale
	retry := s.Retry
	s = clearTransient(s)
	s.Name, s.DrainStep, s.Then = Draining, DrainTree, t
	if t == TargetFailed {
		s.Retry, s.ConfigStale = retry, stale
	}
	return s, StartDrain{Budget: s.Config.DrainBudget}
}

// boot enters booting at the first phase, a new attempt.
func boot(s State) (State, step.Effect) {
	s = clearTransient(s)
	s.Name, s.Phase = Booting, Phases[0]
	s.Attempt++
	return s, RunPhase{Phase: s.Phase, Attempt: s.Attempt}
}

// land enters target t after an interrupted boot or a finished drain.
func land(s State, t Target) (State, step.Effect) {
	switch t {
	case TargetBoot:
		return boot(s)
	case TargetFailed:
		return fail(s)
	case TargetExit:
		s = clearTransient(s)
		s.Name = Exiting
		return s, Exit{Code: ExitClean}
	}
	s = clearTransient(s)
	s.Name = Stopped
	return s, nil
}

// fail enters failed with the pending retry mode. If the config changed
// while the failed boot read it, the boot is tried again at once (DMN-16).
func fail(s State) (State, step.Effect) {
	s.Failures++
	retry, stale := s.Retry, s.ConfigStale
	if retry == "" {
		retry = RetryBackoff
	}
	if stale {
		return boot(s)
	}
	s = clearTransient(s)
	s.Name, s.Retry = Failed, retry
	if retry == RetryHold {
		return s, nil
	}
	s.RetryDelay = s.Config.backoff(s.Failures)
	return s, ScheduleRetry{Delay: s.RetryDelay, Attempt: s.Attempt}
}

// accept wraps a (state, effect) pair as an accepted step; a nil effect
// is none.
func accept(s State, eff step.Effect) (State, []step.Effect) {
	if eff == nil {
		return s, nil
	}
	return s, []step.Effect{eff}
}
