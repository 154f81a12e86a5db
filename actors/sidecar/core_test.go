package sidecar

import (
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func cfg(alwaysOn bool, maxRun time.Duration) Config {
	return Config{AlwaysOn: alwaysOn, MaxRun: maxRun, Backoff: stackfile.SidecarBackoff{Initial: 2 * time.Second, Cap: time.Minute, ResetAfter: time.Minute}}
}

// running brings a sidecar to its first run at now.
func running(t *testing.T, c Config, now time.Time) State {
	t.Helper()
	s, _ := Step(c, State{}, Begin{}, now)
	s, _ = Step(c, s, OpDone{Op: OpCleanup}, now)
	s, _ = Step(c, s, OpDone{Op: OpStart}, now)
	if s.Phase != messages.SidecarRunning {
		t.Fatalf("not running: %+v", s)
	}
	return s
}

func armedAt(fx []step.Effect, timer string) (time.Time, bool) {
	for _, f := range fx {
		if a, ok := f.(step.Arm); ok && a.Timer == timer {
			return a.At, true
		}
	}
	return time.Time{}, false
}

// does reports whether fx runs op.
func does(fx []step.Effect, op Op) bool {
	for _, f := range fx {
		if d, ok := f.(Do); ok && d.Op == op {
			return true
		}
	}
	return false
}

// ends reports whether fx ends the actor.
func ends(fx []step.Effect) bool {
	for _, f := range fx {
		if _, ok := f.(step.End); ok {
			return true
		}
	}
	return false
}

// ACT-11: a dead sidecar is restarted after 2s, 4s, 8s ... capped at 1m.
func TestACT11DoublingBackoffCapped(t *testing.T) {
	c := cfg(false, 0)
	now := t0
	s := running(t, c, now)
	want := []time.Duration{2, 4, 8, 16, 32, 60, 60}
	for i, w := range want {
		now = now.Add(time.Second) // runs shorter than reset_after
		var fx []step.Effect
		s, fx = Step(c, s, Exited{Code: 1}, now)
		at, ok := armedAt(fx, TimerRestart)
		if !ok || at.Sub(now) != w*time.Second {
			t.Fatalf("crash %d: restart in %s, want %ds", i+1, at.Sub(now), w)
		}
		now = at
		s, fx = Step(c, s, Timer{Name: TimerRestart}, now)
		if !does(fx, OpStart) {
			t.Fatalf("crash %d: no start after the backoff", i+1)
		}
		s, _ = Step(c, s, OpDone{Op: OpStart}, now)
	}
	if s.Restarts != len(want) {
		t.Fatalf("restarts %d", s.Restarts)
	}
}

// ACT-11: a run of reset_after (1m) or more resets the backoff.
func TestACT11LongRunResetsBackoff(t *testing.T) {
	c := cfg(false, 0)
	now := t0
	s := running(t, c, now)
	for range 3 {
		now = now.Add(time.Second)
		s, _ = Step(c, s, Exited{Code: 2}, now)
		now = now.Add(time.Minute)
		s, _ = Step(c, s, Timer{Name: TimerRestart}, now)
		s, _ = Step(c, s, OpDone{Op: OpStart}, now)
	}
	now = now.Add(time.Minute) // a stable run
	_, fx := Step(c, s, Exited{Code: 2}, now)
	if at, _ := armedAt(fx, TimerRestart); at.Sub(now) != 2*time.Second {
		t.Fatalf("after a long run: restart in %s, want 2s", at.Sub(now))
	}
}

// ACT-12: exit 0 of a non-always_on sidecar is work done: not restarted;
// always_on restarts any exit, 0 included.
func TestACT12ExitZeroMeansDone(t *testing.T) {
	s := running(t, cfg(false, 0), t0)
	s, fx := Step(cfg(false, 0), s, Exited{Code: 0}, t0.Add(time.Second))
	if s.Phase != messages.SidecarDone {
		t.Fatalf("phase %s", s.Phase)
	}
	if _, ok := armedAt(fx, TimerRestart); ok {
		t.Fatal("a finished worker was scheduled for restart")
	}
	s = running(t, cfg(true, 0), t0)
	s, fx = Step(cfg(true, 0), s, Exited{Code: 0}, t0.Add(time.Second))
	if _, ok := armedAt(fx, TimerRestart); !ok || s.Phase != messages.SidecarBackoff {
		t.Fatalf("always_on exit 0 not restarted: %+v", s)
	}
	// A signal is never "done".
	s = running(t, cfg(false, 0), t0)
	s, _ = Step(cfg(false, 0), s, Exited{Code: -1, Signal: "killed"}, t0.Add(time.Second))
	if s.Phase != messages.SidecarBackoff {
		t.Fatalf("killed worker: %s", s.Phase)
	}
}

// ACT-12: max_run recycles a run that lasts too long: stop, then start at
// once without a backoff.
func TestACT12MaxRunRecycles(t *testing.T) {
	c := cfg(false, time.Hour)
	s, _ := Step(c, State{}, Begin{}, t0)
	s, _ = Step(c, s, OpDone{Op: OpCleanup}, t0)
	s, fx := Step(c, s, OpDone{Op: OpStart}, t0)
	at, ok := armedAt(fx, TimerMaxRun)
	if !ok || at.Sub(t0) != time.Hour {
		t.Fatalf("max_run timer at %v", at)
	}
	s, fx = Step(c, s, Timer{Name: TimerMaxRun}, at)
	if !does(fx, OpStop) || !s.Recycling {
		t.Fatalf("not recycling: %+v", s)
	}
	s, _ = Step(c, s, Exited{Code: -1, Signal: "terminated"}, at) // the stop's own exit
	s, fx = Step(c, s, OpDone{Op: OpStop}, at)
	if !does(fx, OpStart) || s.Phase != messages.SidecarStarting {
		t.Fatalf("not restarted after recycle: %+v %v", s, fx)
	}
}

// ACT-8: a stop that is not proven keeps the sidecar; asking again
// retries; a proven stop ends it.
func TestStopUnprovenRetried(t *testing.T) {
	c := cfg(false, 0)
	s := running(t, c, t0)
	s, fx := Step(c, s, Stop{}, t0)
	if !does(fx, OpStop) {
		t.Fatal("no stop")
	}
	s, _ = Step(c, s, OpDone{Op: OpStop, Err: "timeout"}, t0)
	if !s.Unproven || s.Ended {
		t.Fatalf("unproven stop: %+v", s)
	}
	s, fx = Step(c, s, Stop{}, t0)
	if !does(fx, OpStop) {
		t.Fatal("stop not retried")
	}
	s, fx = Step(c, s, OpDone{Op: OpStop}, t0)
	if !s.Ended || !ends(fx) {
		t.Fatalf("proven stop did not end: %+v", s)
	}
}

// ACT-8, ACT-12: a recycle whose stop failed runs on; a stop asked then
// starts one stop, and asking again while it runs starts no second one
// (the case saved in testdata/rapid).
func TestStopAfterFailedRecycleOnce(t *testing.T) {
	c := cfg(false, 0)
	s := running(t, c, t0)
	s, fx := Step(c, s, Timer{Name: TimerMaxRun}, t0)
	if !does(fx, OpStop) || !s.Recycling {
		t.Fatalf("not recycling: %+v", s)
	}
	s, fx = Step(c, s, OpDone{Op: OpStop, Err: "boom"}, t0)
	if s.Recycling || s.Phase != messages.SidecarRunning {
		t.Fatalf("after a failed recycle: %+v", s)
	}
	if at, ok := armedAt(fx, TimerMaxRun); !ok || at.Sub(t0) != c.Backoff.Initial {
		t.Fatalf("recycle not retried: %v", fx)
	}
	s, fx = Step(c, s, Stop{}, t0)
	if !does(fx, OpStop) {
		t.Fatalf("no stop: %v", fx)
	}
	if _, fx = Step(c, s, Stop{}, t0); len(fx) != 0 {
		t.Fatalf("a second stop while one runs: %v", fx)
	}
}

// A sidecar's events name it in their message; ConfigOf reads the name.
func TestEventsNameTheSidecar(t *testing.T) {
	c := ConfigOf(stackfile.Sidecar{Name: "indexer", Backoff: cfg(false, 0).Backoff})
	s := running(t, c, t0)
	_, fx := Step(c, s, Exited{Code: 3}, t0.Add(time.Second))
	var msgs []string
	for _, f := range fx {
		if e, ok := f.(step.Emit); ok {
			msgs = append(msgs, e.Message)
			if e.Kind != messages.KindSidecarRestarted || e.Level != messages.LevelWarn {
				t.Fatalf("event %+v", e)
			}
		}
	}
	if len(msgs) != 1 || msgs[0] != "indexer: exited 3; restart 1 in 2s" {
		t.Fatalf("messages %q", msgs)
	}
}

// A stop asked during a start waits for it, then stops.
func TestStopDuringStart(t *testing.T) {
	c := cfg(false, 0)
	s, _ := Step(c, State{}, Begin{}, t0)
	s, _ = Step(c, s, OpDone{Op: OpCleanup}, t0)
	s, fx := Step(c, s, Stop{}, t0)
	if len(fx) != 0 {
		t.Fatalf("acted during a start: %v", fx)
	}
	_, fx = Step(c, s, OpDone{Op: OpStart}, t0)
	if !does(fx, OpStop) {
		t.Fatal("no stop after the start")
	}
}

// Property: whatever happens, at most one operation is in flight, a
// restart is never scheduled sooner than the initial delay nor later than
// the cap, and nothing happens after the end.
func TestCoreProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := cfg(rapid.Bool().Draw(rt, "always"), time.Duration(rapid.IntRange(0, 3).Draw(rt, "maxrun"))*time.Minute)
		now := t0
		s, fx := Step(c, State{}, Begin{}, now)
		if len(fx) != 1 || fx[0] != (Do{Op: OpCleanup}) {
			rt.Fatalf("begin: %v, want one cleanup (of an earlier incarnation's instances)", fx)
		}
		inflight := 1
		for i := range rapid.IntRange(1, 60).Draw(rt, "n") {
			now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(rt, "dt")) * time.Second)
			var e any
			switch rapid.IntRange(0, 5).Draw(rt, "ev") {
			case 0:
				e = OpDone{Op: s.Op, Err: rapid.SampledFrom([]string{"", "boom"}).Draw(rt, "err")}
			case 1:
				e = Exited{Code: rapid.IntRange(-1, 2).Draw(rt, "code")}
			case 2:
				e = Timer{Name: TimerRestart}
			case 3:
				e = Timer{Name: TimerMaxRun}
			case 4:
				e = Stop{}
			default:
				e = OpDone{Op: OpStart}
			}
			ended := s.Ended
			wasOp := s.Op
			s, fx = Step(c, s, e, now)
			if ended && len(fx) > 0 {
				rt.Fatalf("step %d: effects after the end: %v", i, fx)
			}
			for _, f := range fx {
				switch f := f.(type) {
				case Do:
					if wasOp != OpNone && !(e == OpDone{Op: wasOp} || isDone(e, wasOp)) {
						rt.Fatalf("step %d: %s started while %s in flight", i, f.Op, wasOp)
					}
					inflight++
				case step.Arm:
					if f.Timer == TimerRestart {
						d := f.At.Sub(now)
						if d < c.Backoff.Initial || d > c.Backoff.Cap {
							rt.Fatalf("step %d: restart in %s", i, d)
						}
					}
				}
			}
		}
	})
}

func isDone(e any, op Op) bool {
	d, ok := e.(OpDone)
	return ok && d.Op == op
}
