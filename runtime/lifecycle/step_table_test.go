package lifecycle

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/engenho/engenho/messages/step"
)

// The samples cover every reachable kind of state (by label); the events
// cover every event kind, with matching and non-matching arguments.

func baseState(name StateName) State {
	s := New(Config{})
	s.Name, s.Attempt, s.Epoch, s.Failures = name, 2, 3, 1
	return s
}

func with(s State, f func(*State)) State { f(&s); return s }

// pending describes a target with its retry mode and hold flag.
type pending struct {
	then  Target
	retry RetryMode
	hold  bool
}

func (p pending) apply(s State) State {
	s.Then, s.Retry, s.Hold = p.then, p.retry, p.hold
	return s
}

var (
	toNone        = pending{}
	toStopped     = pending{then: TargetStopped}
	toStoppedHold = pending{then: TargetStopped, hold: true}
	toBoot        = pending{then: TargetBoot}
	toExit        = pending{then: TargetExit}
	toBackoff     = pending{then: TargetFailed, retry: RetryBackoff}
	toHold        = pending{then: TargetFailed, retry: RetryHold}
)

func sampleStates() []State {
	var out []State
	out = append(out, New(Config{}))
	for _, p := range Phases {
		thens := []pending{toNone, toStopped, toStoppedHold, toBoot, toExit}
		if treeExists(p) {
			thens = append(thens, toBackoff)
		}
		for _, th := range thens {
			out = append(out, th.apply(with(baseState(Booting), func(s *State) { s.Phase = p })))
		}
	}
	out = append(out, with(baseState(Booting), func(s *State) { s.Phase, s.ConfigStale = PhaseListen, true }))
	out = append(out, with(baseState(Running), func(s *State) { s.Failures = 0 }))
	for _, step := range []DrainStep{DrainTree, DrainJournal} {
		for _, th := range []pending{toStopped, toStoppedHold, toBoot, toBackoff, toHold, toExit} {
			out = append(out, th.apply(with(baseState(Draining), func(s *State) { s.DrainStep = step })))
		}
		for _, th := range []pending{toBackoff, toHold} {
			out = append(out, th.apply(with(baseState(Draining), func(s *State) { s.DrainStep, s.ConfigStale = step, true })))
		}
		for _, th := range []pending{toStoppedHold, toBoot, toHold} {
			out = append(out, th.apply(with(baseState(Wedged), func(s *State) { s.DrainStep = step })))
		}
		out = append(out, toHold.apply(with(baseState(Wedged), func(s *State) { s.DrainStep, s.ConfigStale = step, true })))
	}
	out = append(out, baseState(Stopped), with(baseState(Stopped), func(s *State) { s.Hold = true }))
	out = append(out, with(baseState(Failed), func(s *State) { s.Retry, s.RetryDelay, s.Failures = RetryBackoff, 2*time.Second, 2 }))
	out = append(out, with(baseState(Failed), func(s *State) { s.Retry = RetryHold }))
	out = append(out, baseState(Exiting), with(baseState(Exiting), func(s *State) { s.Hold = true }))
	return out
}

func sampleEvents() []Event {
	evs := []Event{BootRequested{}, HoldPresent{}}
	for _, p := range Phases {
		evs = append(evs, PhaseDone{Phase: p},
			PhaseFailed{Phase: p, Class: CauseConfig, Reason: "bad yaml"},
			PhaseFailed{Phase: p, Class: CauseTransient, Reason: "driver down"},
			PhaseFailed{Phase: p, Class: CauseCorrupt, Reason: "000002.sst is damaged"})
	}
	return append(evs,
		PhaseFailed{Phase: PhaseAdopt, Class: CauseDrain, Reason: "wrong class"},
		BackoffElapsed{Attempt: 2}, BackoffElapsed{Attempt: 1},
		ConfigChanged{}, ReconfigureRequested{},
		StartRequested{}, StopRequested{}, StopRequested{Hold: true}, RestartRequested{}, RetryRequested{},
		ExitRequested{Source: "SIGTERM"},
		DrainDone{}, DrainFailed{Reason: "stuck"}, JournalReleased{}, JournalReleaseFailed{Reason: "busy"},
		RootGaveUp{Chain: []string{"root", "stack web", "service api: 4 restarts in 5s"}},
		ReinitRequested{What: "journal", Epoch: 3}, ReinitRequested{What: "journal", Epoch: 2},
		ReinitDone{What: "journal"},
	)
}

// transitions builds the legal transitions: "from | event" -> "to | effect".
// Every other (state, event) pair must be refused with the state unchanged.
func transitions() map[string]string {
	rows := map[string]string{}
	add := func(from, ev, to, eff string) {
		k := from + " | " + ev
		if _, dup := rows[k]; dup {
			panic("duplicate row " + k)
		}
		rows[k] = to + " | " + eff
	}
	const drain60 = "start_drain(1m0s)"
	const boot3 = "run_phase(resolve_config, attempt 3)"
	const sigterm = "exit(SIGTERM)"
	const root = "root_gave_up(root: stack web: service api: 4 restarts in 5s)"

	// resolving
	add("resolving", "boot", "booting/resolve_config", "run_phase(resolve_config, attempt 1)")
	add("resolving", "hold_present", "stopped+hold", "none")
	add("resolving", sigterm, "exiting", "exit(0)")

	// running
	add("running", "stop", "draining/tree>stopped", drain60)
	add("running", "stop --hold", "draining/tree>stopped+hold", drain60)
	add("running", "restart", "draining/tree>boot", drain60)
	add("running", sigterm, "draining/tree>exit", drain60)
	add("running", "config_changed", "running", "apply_config")
	add("running", "reconfigure", "running", "apply_config")
	add("running", root, "draining/tree>failed/backoff", drain60)

	// stopped
	for _, h := range []string{"", "+hold"} {
		from := "stopped" + h
		add(from, "start", "booting/resolve_config", boot3) // start clears the hold
		add(from, "restart", "booting/resolve_config", boot3)
		add(from, sigterm, "exiting"+h, "exit(0)") // exit keeps it for the relaunch
		add(from, "reinit(journal, epoch 3)", from, "move_to_attic(journal)")
		add(from, "reinit_done(journal)", from, "none")
	}
	add("stopped", "stop --hold", "stopped+hold", "none")

	// failed
	for _, mode := range []string{"backoff", "hold"} {
		from := "failed/" + mode
		for _, ev := range []string{"retry", "start", "restart", "config_changed", "reconfigure", "reinit_done(journal)"} {
			add(from, ev, "booting/resolve_config", boot3)
		}
		add(from, "stop", "stopped", "none")
		add(from, "stop --hold", "stopped+hold", "none")
		add(from, sigterm, "exiting", "exit(0)")
		add(from, "reinit(journal, epoch 3)", from, "move_to_attic(journal)")
	}
	add("failed/backoff", "backoff_elapsed(attempt 2)", "booting/resolve_config", boot3)

	// wedged
	for _, step := range []string{"tree", "journal"} {
		resume := map[string]string{"tree": drain60, "journal": "release_journal"}[step]
		for _, th := range []string{">stopped+hold", ">boot", ">failed/hold", ">failed/hold~stale"} {
			from := "wedged/" + step + th
			add(from, "retry", "draining/"+step+th, resume)
			hold := ""
			if th == ">stopped+hold" {
				hold = "+hold"
			}
			add(from, sigterm, "exiting"+hold, "exit(1)")
		}
	}

	// draining
	for _, step := range []string{"tree", "journal"} {
		for _, p := range []pending{toStopped, toStoppedHold, toBoot, toBackoff, toHold, toExit} {
			for _, stale := range []bool{false, true} {
				if stale && p.then != TargetFailed {
					continue
				}
				addDraining(add, step, p, stale)
			}
		}
	}

	// booting
	for _, p := range Phases {
		thens := []pending{toNone, toStopped, toStoppedHold, toBoot, toExit}
		if treeExists(p) {
			thens = append(thens, toBackoff)
		}
		for _, th := range thens {
			addBooting(add, p, th, false)
		}
	}
	addBooting(add, PhaseListen, toNone, true)
	return rows
}

func pendingLabel(p pending, stale bool) string {
	l := ""
	if p.then != TargetNone {
		l = ">" + string(p.then)
		if p.then == TargetFailed {
			l += "/" + string(p.retry)
		}
	}
	if p.hold {
		l += "+hold"
	}
	if stale {
		l += "~stale"
	}
	return l
}

// landing is where a boot that had opened nothing, or a finished drain, goes
// (from a state with attempt 2 and 1 failure so far).
func landing(p pending, stale bool) (string, string) {
	switch {
	case p.then == TargetBoot, p.then == TargetFailed && stale:
		return "booting/resolve_config", "run_phase(resolve_config, attempt 3)"
	case p.then == TargetFailed && p.retry == RetryBackoff:
		return "failed/backoff", "schedule_retry(2s, attempt 2)"
	case p.then == TargetFailed:
		return "failed/hold", "none"
	case p.then == TargetExit:
		return "exiting" + pendingLabel(pending{hold: p.hold}, false), "exit(0)"
	}
	return "stopped" + pendingLabel(pending{hold: p.hold}, false), "none"
}

type addFunc func(from, ev, to, eff string)

func addDraining(add addFunc, step string, p pending, stale bool) {
	from := "draining/" + step + pendingLabel(p, stale)
	at := "draining/" + step
	if step == "tree" {
		add(from, "drain_done", "draining/journal"+pendingLabel(p, stale), "release_journal")
		if p.then == TargetExit {
			add(from, "drain_failed", "exiting"+pendingLabel(pending{hold: p.hold}, false), "exit(1)")
		} else {
			add(from, "drain_failed", "wedged/tree"+pendingLabel(p, stale), "none")
		}
	} else {
		to, eff := landing(p, stale)
		add(from, "journal_released", to, eff)
		if p.then == TargetExit {
			add(from, "journal_release_failed", "exiting"+pendingLabel(pending{hold: p.hold}, false), "exit(1)")
		} else {
			add(from, "journal_release_failed", "wedged/journal"+pendingLabel(p, stale), "none")
		}
	}
	if p.then == TargetExit {
		return // only the drain's own results apply
	}
	// Heading anywhere but failed, a stale config no longer matters: the
	// next boot reads it anyway.
	add(from, "stop", at+pendingLabel(pending{then: TargetStopped, hold: p.hold}, false), "none")
	add(from, "stop --hold", at+pendingLabel(toStoppedHold, false), "none")
	add(from, "restart", at+pendingLabel(toBoot, false), "none")
	add(from, "exit(SIGTERM)", at+pendingLabel(pending{then: TargetExit, hold: p.hold}, false), "none")
	if p.then != TargetBoot {
		add(from, "start", at+pendingLabel(toBoot, false), "none")
	}
	if p.then == TargetFailed {
		add(from, "retry", at+pendingLabel(toBoot, false), "none")
		add(from, "config_changed", at+pendingLabel(p, true), "none")
		add(from, "reconfigure", at+pendingLabel(p, true), "none")
	}
}

func addBooting(add addFunc, p Phase, th pending, stale bool) {
	at := "booting/" + string(p)
	from := at + pendingLabel(th, stale)
	abort := func(to pending) (string, string) {
		if p == PhaseResolveConfig {
			return landing(to, stale)
		}
		return "draining/tree" + pendingLabel(to, stale), "start_drain(1m0s)"
	}

	// phase_done of the current phase
	ev := "phase_done(" + string(p) + ")"
	switch next, hasNext := nextPhase(p); {
	case th.then != TargetNone:
		to, eff := abort(th)
		add(from, ev, to, eff)
	case hasNext:
		add(from, ev, "booting/"+string(next)+pendingLabel(th, stale), fmt.Sprintf("run_phase(%s, attempt 2)", next))
	case stale:
		add(from, ev, "running", "announce_running(epoch 4, reload)")
	default:
		add(from, ev, "running", "announce_running(epoch 4)")
	}

	// phase_failed of the current phase: a pending stop/restart/exit wins.
	for _, class := range []CauseClass{CauseConfig, CauseTransient, CauseCorrupt} {
		if class == CauseCorrupt && p == PhaseResolveConfig {
			continue // refused: resolve_config does not read the journal
		}
		to := th
		if th.then == TargetNone || th.then == TargetFailed {
			to = pending{then: TargetFailed, retry: retryFor(class)}
		}
		toLabel, eff := abort(to)
		add(from, fmt.Sprintf("phase_failed(%s, %s)", p, class), toLabel, eff)
	}

	// operator commands and signals become the pending interruption
	if th.then != TargetExit {
		add(from, "stop", at+pendingLabel(pending{then: TargetStopped, hold: th.hold}, stale), "none")
		add(from, "stop --hold", at+pendingLabel(toStoppedHold, stale), "none")
		add(from, "restart", at+pendingLabel(toBoot, stale), "none")
		add(from, "exit(SIGTERM)", at+pendingLabel(pending{then: TargetExit, hold: th.hold}, stale), "none")
	}
	if th.then == TargetStopped {
		add(from, "start", at+pendingLabel(toNone, stale), "none")
	}
	add(from, "config_changed", at+pendingLabel(th, true), "none")
	add(from, "reconfigure", at+pendingLabel(th, true), "none")

	if treeExists(p) {
		to := th
		if th.then == TargetNone || th.then == TargetFailed {
			to = toBackoff
		}
		add(from, "root_gave_up(root: stack web: service api: 4 restarts in 5s)", at+pendingLabel(to, stale), "none")
	}
}

// TestStepAllPairs is the exhaustive table (DMN-6): every sample state times
// every event is either a listed transition or refused with the state
// unchanged.
func TestStepAllPairs(t *testing.T) {
	rows := transitions()
	used := map[string]bool{}
	labels := map[string]bool{}
	pairs := 0
	for _, s := range sampleStates() {
		if err := validate(s); err != nil {
			t.Fatalf("sample state invalid: %v", err)
		}
		from := label(s)
		if labels[from] {
			t.Fatalf("two samples share label %s", from)
		}
		labels[from] = true
		for _, e := range sampleEvents() {
			pairs++
			key := from + " | " + e.String()
			next, fx := Step(s, e)
			want, legal := rows[key]
			if !legal {
				checkRefused(t, key, s, e, next, fx)
				continue
			}
			used[key] = true
			if r := Refusal(s, e, fx); r != nil {
				t.Errorf("%s: refused (%v), want %s", key, r, want)
				continue
			}
			if len(fx) > 1 {
				t.Errorf("%s: %d effects, the loop performs one", key, len(fx))
			}
			if got := label(next) + " | " + effString(fx); got != want {
				t.Errorf("%s:\n got  %s\n want %s", key, got, want)
			}
			if err := validate(next); err != nil {
				t.Errorf("%s: %v", key, err)
			}
		}
	}
	for key := range rows {
		if !used[key] {
			t.Errorf("table row never exercised (typo in the table?): %s", key)
		}
	}
	t.Logf("%d states x %d events = %d pairs, %d legal", len(labels), len(sampleEvents()), pairs, len(rows))
}

func checkRefused(t *testing.T, key string, s State, e Event, next State, fx []step.Effect) {
	t.Helper()
	r := Refusal(s, e, fx)
	if r == nil {
		t.Errorf("%s: accepted as %s | %s, want refused", key, label(next), effString(fx))
		return
	}
	if !reflect.DeepEqual(next, s) {
		t.Errorf("%s: refused but state changed to %s", key, next)
	}
	if len(fx) != 1 {
		t.Errorf("%s: refused with effects %s besides the refusal", key, effString(fx))
	}
	if !reflect.DeepEqual(r.State, s) || !reflect.DeepEqual(r.Event, e) || r.Reason == "" {
		t.Errorf("%s: refusal %+v does not name state, event and reason", key, r)
	}
}
