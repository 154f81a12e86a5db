package lifecycle

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

// drawEvent draws an event: often the result the loop would report for
// the state's pending work (so sequences get deep into the lifecycle),
// otherwise any event with arguments near the state's.
func drawEvent(t *rapid.T, s State) Event {
	if rapid.IntRange(0, 9).Draw(t, "follow") < 6 {
		if e, ok := resultEvent(t, s); ok {
			return e
		}
	}
	phase := s.Phase
	if phase == "" || rapid.IntRange(0, 4).Draw(t, "other phase") == 0 {
		phase = rapid.SampledFrom(Phases).Draw(t, "phase")
	}
	attempt := s.Attempt
	if rapid.IntRange(0, 3).Draw(t, "stale attempt") == 0 {
		attempt = rapid.IntRange(0, s.Attempt+1).Draw(t, "attempt")
	}
	epoch := s.Epoch
	if rapid.IntRange(0, 3).Draw(t, "stale epoch") == 0 && epoch > 0 {
		epoch--
	}
	class := rapid.SampledFrom([]CauseClass{CauseConfig, CauseTransient, CauseCorrupt}).Draw(t, "class")
	all := []Event{
		BootRequested{}, HoldPresent{},
		PhaseDone{Phase: phase}, PhaseDone{Phase: phase}, PhaseDone{Phase: phase}, PhaseDone{Phase: phase},
		PhaseFailed{Phase: phase, Class: class, Reason: "boom"},
		BackoffElapsed{Attempt: attempt},
		ConfigChanged{}, ReconfigureRequested{},
		StartRequested{}, StopRequested{}, StopRequested{Hold: true}, RestartRequested{}, RetryRequested{},
		DrainDone{}, DrainDone{}, DrainFailed{Reason: "stuck"},
		JournalReleased{}, JournalReleased{}, JournalReleaseFailed{Reason: "busy"},
		RootGaveUp{Chain: []string{"root", "stack a"}},
		ReinitRequested{What: "journal", Epoch: epoch}, ReinitDone{What: "journal"},
	}
	// exit ends a sequence; keep it rare so sequences are long.
	if rapid.IntRange(0, 60).Draw(t, "exit?") == 0 {
		return ExitRequested{Source: "SIGTERM"}
	}
	return rapid.SampledFrom(all).Draw(t, "event")
}

// resultEvent is what the loop would send after performing the state's
// effect: a phase result, a drain result, the retry timer.
func resultEvent(t *rapid.T, s State) (Event, bool) {
	ok := rapid.IntRange(0, 5).Draw(t, "succeeds") > 0
	switch {
	case s.Name == Booting && ok:
		return PhaseDone{Phase: s.Phase}, true
	case s.Name == Booting:
		class := rapid.SampledFrom([]CauseClass{CauseConfig, CauseTransient, CauseTransient, CauseCorrupt}).Draw(t, "class")
		return PhaseFailed{Phase: s.Phase, Class: class, Reason: "boom"}, true
	case s.Name == Draining && s.DrainStep == DrainTree && ok:
		return DrainDone{}, true
	case s.Name == Draining && s.DrainStep == DrainTree:
		return DrainFailed{Reason: "stuck"}, true
	case s.Name == Draining && ok:
		return JournalReleased{}, true
	case s.Name == Draining:
		return JournalReleaseFailed{Reason: "busy"}, true
	case s.Name == Failed && s.Retry == RetryBackoff:
		return BackoffElapsed{Attempt: s.Attempt}, true
	case s.Name == Resolving:
		return BootRequested{}, true
	}
	return nil, false
}

// entering reports whether a step moved into state name from elsewhere.
func entering(prev, next State, name StateName) bool {
	return next.Name == name && prev.Name != name
}

// checkEffect checks that eff (nil: none) is legal for the step prev ->
// next, and that each state's entry comes with its effect.
func checkEffect(t *rapid.T, prev, next State, e Event, eff step.Effect) {
	t.Helper()
	fail := func(why string) { t.Fatalf("%s --%s--> %s with %s: %s", prev, e, next, eff, why) }
	switch eff := eff.(type) {
	case RunPhase:
		if next.Name != Booting || eff.Phase != next.Phase || eff.Attempt != next.Attempt {
			fail("run_phase outside booting or for another phase")
		}
		freshBoot := eff.Phase == PhaseResolveConfig && next.Attempt == prev.Attempt+1
		nextOfPrev, _ := nextPhase(prev.Phase)
		advance := prev.Name == Booting && eff.Phase == nextOfPrev && next.Attempt == prev.Attempt
		if !freshBoot && !advance {
			fail("run_phase neither starts a boot nor advances one")
		}
	case StartDrain:
		if next.Name != Draining || next.DrainStep != DrainTree || prev.Name == Draining {
			fail("start_drain without entering draining")
		}
		if eff.Budget != next.Config.DrainBudget {
			fail("drain budget is not the configured one")
		}
	case ReleaseJournal:
		if next.Name != Draining || next.DrainStep != DrainJournal || prev.DrainStep == DrainJournal && prev.Name == Draining {
			fail("release_journal without entering the journal step")
		}
	case ScheduleRetry:
		if !entering(prev, next, Failed) || next.Retry != RetryBackoff {
			fail("schedule_retry without entering failed/backoff")
		}
		if eff.Delay != next.RetryDelay || eff.Delay != wantDelay(next.Failures) || eff.Attempt != next.Attempt {
			fail("retry delay off the 1s..60s ladder")
		}
	case Exit:
		if !entering(prev, next, Exiting) || (eff.Code != ExitClean && eff.Code != ExitUnreleased) {
			fail("exit without entering exiting")
		}
	case AnnounceRunning:
		if !entering(prev, next, Running) || prev.Name != Booting || eff.Epoch != next.Epoch {
			fail("announce_running without entering running from booting")
		}
	case ApplyConfig:
		if prev.Name != Running || next.Name != Running {
			fail("apply_config outside running")
		}
	case MoveToAttic:
		if !reflect.DeepEqual(prev, next) || (prev.Name != Stopped && prev.Name != Failed) {
			fail("move_to_attic outside stopped/failed or changing state")
		}
	case nil:
		if entering(prev, next, Running) || entering(prev, next, Exiting) || entering(prev, next, Draining) ||
			(entering(prev, next, Failed) && next.Retry == RetryBackoff) {
			fail("entered a state without its effect")
		}
		if next.Name == Booting && (next.Attempt != prev.Attempt || next.Phase != prev.Phase) {
			fail("boot progressed without run_phase")
		}
	default:
		fail("unknown effect")
	}
}

// TestStepProperties drives random event sequences (DMN-6) and checks, at
// every step: a refused event changes nothing; every effect is legal in its
// state; backoff delays follow 1s, 2s, 4s .. 60s and reset after a
// successful boot (DMN-7); the epoch grows exactly when running is entered
// (DMN-14); the attempt count grows exactly when a boot starts; exiting is
// terminal; exit is never refused outside exiting or a pending exit.
func TestStepProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := New(Config{})
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for range steps {
			e := drawEvent(t, s)
			next, fx := Step(s, e)
			if r := Refusal(s, e, fx); r != nil {
				if r.Reason == "" {
					t.Fatalf("refused %s without a reason", e)
				}
				if !reflect.DeepEqual(next, s) {
					t.Fatalf("refused %s changed %s to %s", e, s, next)
				}
				if len(fx) != 1 {
					t.Fatalf("refused %s returned effects %s", e, effString(fx))
				}
				if _, isExit := e.(ExitRequested); isExit && s.Name != Exiting && s.Then != TargetExit {
					t.Fatalf("exit refused in %s: %v", s, r)
				}
				continue
			}
			eff := only(t, fx)
			if s.Name == Exiting {
				t.Fatalf("exiting accepted %s", e)
			}
			if verr := validate(next); verr != nil {
				t.Fatalf("after %s --%s-->: %v", s, e, verr)
			}
			checkEffect(t, s, next, e, eff)
			checkCounters(t, s, next, e, eff)
			s = next
		}
	})
}

func checkCounters(t *rapid.T, prev, next State, e Event, eff step.Effect) {
	t.Helper()
	wantEpoch := prev.Epoch
	if entering(prev, next, Running) {
		wantEpoch++
	}
	if next.Epoch != wantEpoch {
		t.Fatalf("%s --%s--> %s: epoch %d -> %d", prev, e, next, prev.Epoch, next.Epoch)
	}
	wantAttempt := prev.Attempt
	if rp, ok := eff.(RunPhase); ok && rp.Phase == PhaseResolveConfig {
		wantAttempt++
	}
	if next.Attempt != wantAttempt {
		t.Fatalf("%s --%s--> %s: attempt %d -> %d", prev, e, next, prev.Attempt, next.Attempt)
	}
	switch {
	case entering(prev, next, Running):
		if next.Failures != 0 {
			t.Fatalf("failures not reset on running")
		}
	case next.Failures != prev.Failures && next.Failures != prev.Failures+1:
		t.Fatalf("%s --%s--> %s: failures %d -> %d", prev, e, next, prev.Failures, next.Failures)
	}
}

// TestBackoffLadder: consecutive transient boot failures wait 1s, 2s, 4s ..
// 60s, and a successful boot resets the ladder (DMN-7).
func TestBackoffLadder(t *testing.T) {
	s := New(Config{})
	s = mustStep(t, s, BootRequested{})
	var delays []time.Duration
	for range 9 {
		s = mustStep(t, s, PhaseFailed{Phase: PhaseResolveConfig, Class: CauseTransient, Reason: "incus down"})
		delays = append(delays, s.RetryDelay)
		s = mustStep(t, s, BackoffElapsed{Attempt: s.Attempt})
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if !reflect.DeepEqual(delays, want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	s = bootToRunning(t, s)
	s = mustStep(t, s, RootGaveUp{Chain: []string{"root", "stack web"}})
	s = mustStep(t, s, DrainDone{})
	s, fx := Step(s, JournalReleased{})
	if eff := only(t, fx); eff != (ScheduleRetry{Delay: time.Second, Attempt: s.Attempt}) {
		t.Fatalf("after a successful boot the ladder restarts at 1s: got %s", effString(fx))
	}
}

// TestConfigFailureHolds: a config that does not resolve fails into hold,
// which waits for a config change or an operator's retry, never a timer
// (DMN-7).
func TestConfigFailureHolds(t *testing.T) {
	s := mustStep(t, New(Config{}), BootRequested{})
	s, fx := Step(s, PhaseFailed{Phase: PhaseResolveConfig, Class: CauseConfig, Reason: "line 3: unknown key"})
	if s.Name != Failed || s.Retry != RetryHold || len(fx) != 0 {
		t.Fatalf("got %s, %s; want failed/hold, none", s, effString(fx))
	}
	if s.LastError == nil || s.LastError.Error() != "resolve_config: config: line 3: unknown key" {
		t.Fatalf("last error %v", s.LastError)
	}
	if !refused(s, BackoffElapsed{Attempt: s.Attempt}) {
		t.Fatal("a held failure left on a timer")
	}
	for _, e := range []Event{ConfigChanged{}, RetryRequested{}} {
		next, fx := Step(s, e)
		if next.Name != Booting || only(t, fx) != (RunPhase{Phase: PhaseResolveConfig, Attempt: 2}) {
			t.Fatalf("%s: got %s, %s", e, next, effString(fx))
		}
	}
}

// REL-5, DMN-7: a damaged journal fails the boot into hold with class
// corrupt, never a backoff timer; the operator's retry or a finished
// `reinit journal` boots again, a timer never does. A phase that does not
// read the journal cannot report it damaged.
func TestREL5CorruptJournalHolds(t *testing.T) {
	s := mustStep(t, mustStep(t, New(Config{}), BootRequested{}), PhaseDone{Phase: PhaseResolveConfig})
	why := "the journal is damaged: journal /var/lib/engenho/journal/000002.sst: table is damaged; run `engenho reinit journal`"
	s, fx := Step(s, PhaseFailed{Phase: PhaseOpenJournal, Class: CauseCorrupt, Reason: why})
	if only(t, fx) != (StartDrain{Budget: 60 * time.Second}) {
		t.Fatalf("got %s, %s; want a drain of what the boot opened", s, effString(fx))
	}
	s = mustStep(t, mustStep(t, s, DrainDone{}), JournalReleased{})
	if s.Name != Failed || s.Retry != RetryHold || s.RetryDelay != 0 {
		t.Fatalf("got %s, want failed/hold", s)
	}
	if s.LastError == nil || s.LastError.Class != CauseCorrupt || s.LastError.Error() != "open_journal: corrupt: "+why {
		t.Fatalf("last error %v", s.LastError)
	}
	if !refused(s, BackoffElapsed{Attempt: s.Attempt}) {
		t.Fatal("a corrupt journal left on a timer")
	}
	if _, fx := Step(s, ReinitRequested{What: "journal", Epoch: s.Epoch}); only(t, fx) != (MoveToAttic{What: "journal"}) {
		t.Fatalf("reinit while held: %s", effString(fx))
	}
	for _, e := range []Event{ReinitDone{What: "journal"}, RetryRequested{}} {
		next, fx := Step(s, e)
		if next.Name != Booting || only(t, fx) != (RunPhase{Phase: PhaseResolveConfig, Attempt: s.Attempt + 1}) {
			t.Fatalf("%s: got %s, %s", e, next, effString(fx))
		}
	}
	boot := mustStep(t, New(Config{}), BootRequested{})
	if !refused(boot, PhaseFailed{Phase: PhaseResolveConfig, Class: CauseCorrupt, Reason: "?"}) {
		t.Fatal("resolve_config reported the journal damaged")
	}
	stopped := State{Name: Stopped, Config: s.Config}
	if next, fx := Step(stopped, ReinitDone{What: "journal"}); next.Name != Stopped || len(fx) != 0 {
		t.Fatalf("reinit done while stopped: %s, %s", next, effString(fx))
	}
}

// TestRootGaveUpFails: when the root supervisor gives up, the lifecycle
// drains and lands in failed with the chain of reasons (SUP-8).
func TestRootGaveUpFails(t *testing.T) {
	s := bootToRunning(t, mustStep(t, New(Config{}), BootRequested{}))
	chain := []string{"root: 4 restarts in 5s", "stack web", "service api", "replica 1: exit 137"}
	s = mustStep(t, s, RootGaveUp{Chain: chain})
	s = mustStep(t, s, DrainDone{})
	s = mustStep(t, s, JournalReleased{})
	if s.Name != Failed || s.Retry != RetryBackoff || s.LastError == nil ||
		!reflect.DeepEqual(s.LastError.Reasons, chain) || s.LastError.Class != CauseSupervision {
		t.Fatalf("got %s with %+v", s, s.LastError)
	}
}

// TestStopWhileBootingWaitsForPhaseBoundary: stop during a boot is applied
// at the next phase boundary, then drains what was started (DMN-8).
func TestStopWhileBootingWaitsForPhaseBoundary(t *testing.T) {
	s := mustStep(t, New(Config{}), BootRequested{})
	s = mustStep(t, s, PhaseDone{Phase: PhaseResolveConfig})
	s, fx := Step(s, StopRequested{Hold: true})
	if Refusal(s, StopRequested{Hold: true}, fx) != nil || s.Name != Booting || s.Phase != PhaseOpenJournal || !s.Hold || len(fx) != 0 {
		t.Fatalf("stop during a phase: got %s, %s", s, effString(fx))
	}
	s, fx = Step(s, PhaseDone{Phase: PhaseOpenJournal})
	if s.Name != Draining || s.Then != TargetStopped || only(t, fx) != (StartDrain{Budget: 60 * time.Second}) {
		t.Fatalf("at the boundary: got %s, %s", s, effString(fx))
	}
	s = mustStep(t, s, DrainDone{})
	s = mustStep(t, s, JournalReleased{})
	if s.Name != Stopped || !s.Hold {
		t.Fatalf("got %s, want stopped+hold", s)
	}
}

// TestReinitBoundToEpoch: reinit carries the epoch the operator saw; once
// the runtime has run again it is refused (DMN-14).
func TestReinitBoundToEpoch(t *testing.T) {
	s := bootToRunning(t, mustStep(t, New(Config{}), BootRequested{}))
	s = mustStep(t, mustStep(t, mustStep(t, s, StopRequested{}), DrainDone{}), JournalReleased{})
	seen := s.Epoch
	s = bootToRunning(t, mustStep(t, s, StartRequested{}))
	s = mustStep(t, mustStep(t, mustStep(t, s, StopRequested{}), DrainDone{}), JournalReleased{})
	if !refused(s, ReinitRequested{What: "journal", Epoch: seen}) {
		t.Fatalf("reinit with a moved epoch accepted (epoch %d, now %d)", seen, s.Epoch)
	}
	if _, fx := Step(s, ReinitRequested{What: "journal", Epoch: seen}); !strings.Contains(effString(fx), "run reinit again") {
		t.Fatalf("a moved epoch's refusal does not say what to do: %s", effString(fx))
	}
	if _, fx := Step(s, ReinitRequested{What: "journal", Epoch: s.Epoch}); only(t, fx) != (MoveToAttic{What: "journal"}) {
		t.Fatalf("reinit at the current epoch: %s", effString(fx))
	}
}

func mustStep(t *testing.T, s State, e Event) State {
	t.Helper()
	next, fx := Step(s, e)
	if r := Refusal(s, e, fx); r != nil {
		t.Fatalf("%s in %s: %v", e, s, r)
	}
	return next
}

func bootToRunning(t *testing.T, s State) State {
	t.Helper()
	for s.Name == Booting {
		s = mustStep(t, s, PhaseDone{Phase: s.Phase})
	}
	if s.Name != Running {
		t.Fatalf("boot ended in %s", s)
	}
	return s
}
