package supervise

import (
	"testing"

	"github.com/engenho/engenho/messages"
	"pgregory.net/rapid"
)

type quietSink struct{ evs []messages.Event }

func (r *quietSink) Emit(ev messages.Event) { r.evs = append(r.evs, ev) }

// SVC-26: Admit drops a state event that finds its subject exactly as last
// announced, and admits everything else; an action resets the subject.
func TestSVC26Admit(t *testing.T) {
	state := messages.Event{Kind: "stack.serving", Fingerprint: "serving"}
	action := messages.Event{Kind: "replica.restarted"}
	cases := []struct {
		name     string
		last     string
		ev       messages.Event
		next     string
		admitted bool
	}{
		{"a state never announced", "", state, "serving", true},
		{"the same state again", "serving", state, "serving", false},
		{"another state", "failed", state, "serving", true},
		{"an action after a state", "serving", action, "", true},
		{"an action after an action", "", action, "", true},
		{"an actor restart after a state (SUP-18)", "serving", messages.Event{Kind: messages.KindActorRestarted}, "serving", true},
		{"an escalation after a state (SUP-18)", "serving", messages.Event{Kind: messages.KindActorEscalated}, "serving", true},
	}
	for _, c := range cases {
		next, ok := Admit(c.last, c.ev)
		if next != c.next || ok != c.admitted {
			t.Errorf("%s: Admit(%q) = %q, %v; want %q, %v", c.name, c.last, next, ok, c.next, c.admitted)
		}
	}
}

// SVC-26: the filter keeps one announcement per subject, is seeded from
// the log (a restarted daemon), and says a state again after an action or
// another state in between.
func TestSVC26QuietFilter(t *testing.T) {
	rec := &quietSink{}
	q := NewQuiet(rec)
	down := messages.Event{Kind: messages.KindReplicaLimit, Stack: "web", Service: "api", Instance: "i1", Fingerprint: "left down"}
	q.Seed([]messages.Event{down})
	q.Emit(down) // adopted again after a restart: as announced
	other := down
	other.Instance = "i2"
	q.Emit(other) // another subject
	q.Emit(messages.Event{Kind: messages.KindReplicaRestarted, Stack: "web", Service: "api", Instance: "i1"})
	q.Emit(down) // left down again after a restart: said again
	q.Emit(down)
	var got []string
	for _, ev := range rec.evs {
		got = append(got, ev.Kind+" "+ev.Instance)
	}
	want := []string{"replica.restart_limit i2", "replica.restarted i1", "replica.restart_limit i1"}
	if len(got) != len(want) {
		t.Fatalf("announced %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("announced %v, want %v", got, want)
		}
	}
	if q.Dropped() != 2 {
		t.Fatalf("dropped %d, want 2", q.Dropped())
	}
}

// SVC-26 property: over any sequence of events of a few subjects, the
// filter passes an event unless it carries the same fingerprint as the
// last event of its subject that was passed or dropped, and no two
// consecutive announcements of a subject carry the same fingerprint.
func TestSVC26QuietProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rec := &quietSink{}
		q := NewQuiet(rec)
		last := map[string]string{}
		for i, n := 0, rapid.IntRange(0, 60).Draw(rt, "n"); i < n; i++ {
			ev := messages.Event{
				Kind:        "k",
				Stack:       rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "stack"),
				Instance:    rapid.SampledFrom([]string{"", "i"}).Draw(rt, "instance"),
				Fingerprint: rapid.SampledFrom([]string{"", "x", "y"}).Draw(rt, "fp"),
			}
			key := ev.Stack + "/" + ev.Instance
			before := len(rec.evs)
			q.Emit(ev)
			passed := len(rec.evs) > before
			want := ev.Fingerprint == "" || ev.Fingerprint != last[key]
			if passed != want {
				rt.Fatalf("event %d %+v passed %v, want %v (last %q)", i, ev, passed, want, last[key])
			}
			last[key] = ev.Fingerprint
		}
		seen := map[string]string{}
		for _, ev := range rec.evs {
			key := ev.Stack + "/" + ev.Instance
			if ev.Fingerprint != "" && seen[key] == ev.Fingerprint {
				rt.Fatalf("announced %q twice in a row for %s", ev.Fingerprint, key)
			}
			seen[key] = ev.Fingerprint
		}
	})
}
