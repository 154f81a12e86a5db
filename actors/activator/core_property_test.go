package activator

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/host"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

// world is the core with a model of everything around it, as the shell
// and the supervisor would behave: the children and whether an
// incarnation of each runs, the memo, the armed timers.
type world struct {
	s       State
	now     time.Time
	kids    []string
	running map[string]bool
	memo    map[string]messages.HostDefinition
	armed   map[string]bool
	// releasing are the owed releases the shell is retrying now.
	releasing map[string]bool
	ended     bool
}

func newWorld() *world {
	return &world{now: t0, running: map[string]bool{}, memo: map[string]messages.HostDefinition{}, armed: map[string]bool{},
		releasing: map[string]bool{}}
}

// step feeds e to the core as the shell does and checks every property of
// the step.
func (w *world) step(t *rapid.T, e Event) {
	w.apply(t, e)
	w.invariants(t)
}

func (w *world) apply(t *rapid.T, e Event) {
	if m, ok := e.(messages.Timer); ok {
		delete(w.armed, m.Name) // it fired (supervise.Timers.Fresh)
	}
	if m, ok := e.(messages.ActivatorOwedDone); ok {
		delete(w.releasing, m.Host)
	}
	w.s.Children = slices.Clone(w.kids)
	prev := w.s.clone()
	next, fx := Step(coreCfg, w.s, e, w.now)
	if !reflect.DeepEqual(prev, w.s.clone()) {
		t.Fatalf("%T: Step changed the state it was given", e)
	}
	w.check(t, prev, next, e, fx)
	w.s = next
	for _, key := range w.perform(t, fx) {
		w.apply(t, SpawnFailed{Key: key})
	}
}

// perform plays the shell's part for each effect, and a failing start now
// and then, which goes back to the core (the shell does that inline; here
// it comes after the step's other effects, which cannot reach a child
// that never started anyway).
func (w *world) perform(t *rapid.T, fx []step.Effect) (failed []string) {
	for _, f := range fx {
		switch f := f.(type) {
		case Remember:
			w.memo[f.Key] = f.Def
		case Forget:
			delete(w.memo, f.Key)
		case Spawn:
			if rapid.IntRange(0, 19).Draw(t, "start fails") == 0 {
				failed = append(failed, f.Key)
				continue
			}
			w.kids = append(w.kids, f.Key)
			w.running[f.Key] = true
		case Retire:
			if !w.running[f.Key] {
				w.removeKid(f.Key) // the supervisor stops a child that is not running at once
			}
		case Kill:
			w.running[f.Key] = false
		case step.Arm:
			w.armed[f.Timer] = true
		case step.Cancel:
			delete(w.armed, f.Timer)
		case step.End:
			w.ended = true
		}
	}
	return failed
}

func (w *world) removeKid(key string) {
	w.kids = slices.DeleteFunc(w.kids, func(k string) bool { return k == key })
	delete(w.running, key)
}

// check holds for the effects of one step.
func (w *world) check(t *rapid.T, prev, next State, e Event, fx []step.Effect) {
	fail := func(format string, args ...any) {
		t.Fatalf("%T %+v: %s\neffects %#v", e, e, fmt.Sprintf(format, args...), fx)
	}
	spawned := map[string]bool{}
	for _, f := range fx {
		switch f := f.(type) {
		case step.Refuse:
			fail("refused a known event: %s", f.Reason)
		case Spawn:
			if slices.Contains(prev.Children, f.Key) || spawned[f.Key] {
				fail("spawned %s, already a child", f.Key)
			}
			spawned[f.Key] = true
		case Tell:
			if !slices.Contains(next.Children, f.Key) {
				fail("told %s, not a child", f.Key)
			}
			if wake, ok := f.Msg.(messages.HostWake); ok && wake.Reason == messages.WakeDue {
				en := next.Hosts[f.Key]
				if next.Draining || en.State != messages.HostAsleep || en.Retired || next.Dues[en.Host].After(w.now) {
					fail("a due wake of %s (%+v) that is not due", f.Key, en)
				}
			}
		case Retire, Kill:
			if key := keyOf(f); !slices.Contains(next.Children, key) {
				fail("%T of %s, not a child", f, key)
			}
		case ReleaseOwed:
			if _, owed := prev.Orphans[f.Owed.Host]; !owed || w.releasing[f.Owed.Host] || prev.Draining {
				fail("release of %s: not an orphan, or already under way, or draining", f.Owed.Host)
			}
			w.releasing[f.Owed.Host] = true
		case step.Arm:
			if f.Timer == TimerSweep && next.Draining {
				fail("sweep armed while draining")
			}
		case step.End:
			if w.ended || !next.Draining {
				fail("ended twice, or without a drain")
			}
		}
	}
	want := slices.Clone(prev.Children)
	for _, f := range fx {
		if sp, ok := f.(Spawn); ok {
			want = append(want, sp.Key)
		}
	}
	if sf, ok := e.(SpawnFailed); ok {
		want = slices.DeleteFunc(want, func(k string) bool { return k == sf.Key })
	}
	if !slices.Equal(next.Children, want) {
		fail("children %v, want %v: the ones before and those it started", next.Children, want)
	}
	if _, ok := e.(messages.Shutdown); ok && !prev.Draining {
		for _, key := range prev.Children {
			if !slices.Contains(fx, step.Effect(Tell{Key: key, Msg: messages.HostDrain{}})) {
				fail("shutdown did not tell %s to drain", key)
			}
		}
	}
}

func keyOf(f step.Effect) string {
	switch f := f.(type) {
	case Retire:
		return f.Key
	case Kill:
		return f.Key
	}
	return ""
}

// invariants hold between steps.
func (w *world) invariants(t *rapid.T) {
	s := w.s
	if !reflect.DeepEqual(s.Defs, w.memo) {
		t.Fatalf("the memo %v is not the core's definitions %v", keys(w.memo), keys(s.Defs))
	}
	owners := map[string]string{}
	for key, e := range s.Hosts {
		if e.Retired {
			continue
		}
		if _, ok := s.Defs[key]; !ok {
			t.Fatalf("live host %s has no definition in the memo", key)
		}
		if !slices.Contains(w.kids, key) {
			t.Fatalf("live host %s is not a child", key)
		}
		svc := e.Stack + "/" + e.Service
		if other, dup := owners[svc]; dup {
			t.Fatalf("service %s has two live hosts, %s and %s", svc, other, key)
		}
		owners[svc] = key
	}
	if got := w.armed[TimerSweep]; got != s.SweepArmed || got && s.Draining {
		t.Fatalf("sweep armed %v, the state says %v, draining %v", got, s.SweepArmed, s.Draining)
	}
	if something := len(s.Hosts) > 0 || len(s.Orphans) > 0; something && !s.Draining && !w.armed[TimerSweep] {
		t.Fatalf("sweep not armed with %d hosts and %d owed releases", len(s.Hosts), len(s.Orphans))
	}
	if got, want := w.armed[TimerDrain], s.Draining && !s.Ended; got != want {
		t.Fatalf("drain timer armed %v, draining %v, ended %v", got, s.Draining, s.Ended)
	}
	if s.Ended != w.ended {
		t.Fatalf("ended %v, told to end %v", s.Ended, w.ended)
	}
}

func keys[V any](m map[string]V) []string { return sortedKeys(m) }

var (
	propStacks   = []string{"web", "jobs"}
	propServices = []string{"a", "b", "c"}
	propHosts    = []string{"h1.localhost", "h2.localhost", "h3.localhost", ""}
	propStates   = []messages.HostState{messages.HostAsleep, messages.HostWaking, messages.HostAwake, messages.HostStopping}
)

func drawDef(t *rapid.T) messages.HostDefinition {
	stack := rapid.SampledFrom(propStacks).Draw(t, "stack")
	svc := rapid.SampledFrom(propServices).Draw(t, "service")
	h := rapid.SampledFrom(propHosts).Draw(t, "host")
	var d messages.HostDefinition
	if h == "" || rapid.Bool().Draw(t, "worker") {
		d = workerDef(stack, svc, h, sc("job", false, 0, "/bin/true"))
	} else {
		d = hostDef(stack, svc, h)
	}
	d.Stopped = rapid.IntRange(0, 5).Draw(t, "stopped") == 0
	d.Deployment = fmt.Sprint(rapid.IntRange(1, 3).Draw(t, "deployment"))
	return d
}

// drawEvent draws what happens next: a message to the activator, or the
// supervisor's doing (a child crashes, is restarted, ends), or time.
func (w *world) drawEvent(t *rapid.T) (Event, bool) {
	pick := func(from []string, label string) (string, bool) {
		if len(from) == 0 {
			return "", false
		}
		return rapid.SampledFrom(from).Draw(t, label), true
	}
	switch rapid.IntRange(0, 13).Draw(t, "what") {
	case 0, 1, 2:
		return drawDef(t), true
	case 3:
		return messages.HostRemove{Stack: rapid.SampledFrom(propStacks).Draw(t, "stack"), Service: rapid.SampledFrom(propServices).Draw(t, "service")}, true
	case 4, 5:
		key, ok := pick(append(slices.Clone(w.kids), "host:nobody"), "report key")
		due := rapid.SampledFrom([]time.Duration{0, -time.Minute, time.Hour}).Draw(t, "due in")
		r := messages.HostReport{Key: key, State: rapid.SampledFrom(propStates).Draw(t, "state"), Drained: rapid.Bool().Draw(t, "drained")}
		if due != 0 {
			r.Due = w.now.Add(due)
		}
		return r, ok
	case 6:
		name, ok := pick(sortedKeys(w.armed), "timer")
		return messages.Timer{Name: name}, ok
	case 7:
		h, ok := pick(sortedKeys(w.releasing), "owed host")
		return messages.ActivatorOwedDone{Host: h, Settled: rapid.Bool().Draw(t, "settled")}, ok
	case 8: // a running child crashes; the supervisor will restart it
		var up []string
		for _, k := range w.kids {
			if w.running[k] {
				up = append(up, k)
			}
		}
		key, ok := pick(up, "crash")
		w.running[key] = false
		return messages.ChildExited{Name: key, Reason: messages.ExitPanic}, ok
	case 9: // a child that is not running is started again
		var down []string
		for _, k := range w.kids {
			if !w.running[k] {
				down = append(down, k)
			}
		}
		if key, ok := pick(down, "restart"); ok {
			w.running[key] = true
		}
		return nil, false
	case 10: // a child ends for good (retired, or given up on)
		key, ok := pick(w.kids, "ends")
		w.removeKid(key)
		return messages.ChildExited{Name: key}, ok
	case 11: // a retiring child's stop timed out: killed, and forgotten silently
		var retiring []string
		for _, k := range w.kids {
			if w.s.Hosts[k].Retired {
				retiring = append(retiring, k)
			}
		}
		if key, ok := pick(retiring, "stop timed out"); ok {
			w.removeKid(key)
		}
		return nil, false
	case 12:
		if rapid.IntRange(0, 9).Draw(t, "shutdown?") == 0 {
			return messages.Shutdown{}, true
		}
		return nil, false
	}
	w.now = w.now.Add(time.Duration(rapid.IntRange(0, 30).Draw(t, "seconds")) * time.Second)
	return nil, false
}

// TestCoreProperties drives random sequences of definitions, removals,
// reports, timers, owed-release results, supervisor doings and shutdown
// through the core and checks at every step (SUP-1, SUP-9, ACT-8, ACT-10,
// ACT-12, ACT-13): Step never changes the state it was given and refuses
// nothing it knows; the memo it writes is the definitions it keeps; every
// live host has a definition and a child, and a service has at most one
// live host; a host actor is started only when it is not a child, and
// messages go only to children; a due wake goes only to a sleeping host
// whose time came, and never while draining; an owed release is retried
// once at a time and not while draining; the sweep is armed while not
// draining and there is a host or an owed release (and never while
// draining: an activator with neither sleeps, PERF-3), the drain timer
// exactly while draining and not ended;
// shutdown tells every child to drain, and the activator ends at most once
// and only after shutdown.
func TestCoreProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld()
		var owed []messages.OwedRelease
		for _, h := range propHosts[:2] {
			if rapid.Bool().Draw(t, "owed at start") {
				owed = append(owed, messages.OwedRelease{Host: h, Epoch: "e"})
			}
		}
		defs := map[string]messages.HostDefinition{}
		for range rapid.IntRange(0, 3).Draw(t, "memo size") {
			d := drawDef(t)
			defs[host.Key(d)] = d
		}
		for k, d := range defs {
			w.memo[k] = d // the memo outlived the last incarnation
		}
		w.step(t, Started{Defs: defs, Owed: owed,
			Dues: []messages.DueTime{{Host: propHosts[2], At: t0.Add(time.Minute)}}})
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			if e, ok := w.drawEvent(t); ok {
				w.step(t, e)
			}
		}
	})
}
