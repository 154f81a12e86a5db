package service

import (
	"testing"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

func recoveryState() State {
	return State{Target: target("1", "r1", 3, "stop-first"), Failed: map[string]bool{}, Adopted: true, DepsMet: true,
		Replicas: map[string]Replica{
			"a": {ID: "a", Slot: 1, Revision: "r1", InRotation: true, Intent: messages.IntentRun},
			"b": {ID: "b", Slot: 2, Revision: "r1", InRotation: true, Intent: messages.IntentRun},
			"c": {ID: "c", Slot: 3, Revision: "r1", InRotation: false, Intent: messages.IntentRun},
		}}
}

func emitted(fx []step.Effect, kind string) int {
	n := 0
	for _, f := range fx {
		if e, ok := f.(step.Emit); ok && e.Kind == kind {
			n++
		}
	}
	return n
}

func effectOf[T step.Effect](fx []step.Effect) (T, bool) {
	for _, f := range fx {
		if v, ok := f.(T); ok {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// SVC-30, SVC-33: what may be published: every serving replica, but while
// inhibited or in a slot whose retirement is pending only those already
// applied.
func TestSVC30SVC33Publishable(t *testing.T) {
	cases := []struct {
		name      string
		inhibited string
		pending   map[string]Retirement
		applied   map[string]bool
		want      []string
	}{
		{name: "normal: every serving replica", want: []string{"a", "b"}},
		{name: "SVC-30 inhibited: only those applied", inhibited: "port closed", applied: map[string]bool{"a": true}, want: []string{"a"}},
		{name: "SVC-30 inhibited, none applied", inhibited: "port closed", want: nil},
		{name: "SVC-33 pending slot 2: nothing new there", pending: map[string]Retirement{"old": {ID: "old", Slot: 2}}, want: []string{"a"}},
		{name: "SVC-33 pending slot 2, b already applied", pending: map[string]Retirement{"old": {ID: "old", Slot: 2}}, applied: map[string]bool{"b": true}, want: []string{"a", "b"}},
		{name: "not serving is never published", applied: map[string]bool{"c": true}, want: []string{"a", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := recoveryState()
			s.Inhibited, s.Retirements = c.inhibited, c.pending
			got := Publishable(s, c.applied)
			if len(got) != len(c.want) {
				t.Fatalf("publishable %v, want %v", got, c.want)
			}
			for _, id := range c.want {
				if !got[id] {
					t.Fatalf("publishable %v, want %v", got, c.want)
				}
			}
		})
	}
}

// SVC-30: a refused withdrawal inhibits publication, said once, with the
// reason; a successful one lifts it, said once, and plans again.
func TestSVC30InhibitionEvents(t *testing.T) {
	s := recoveryState()
	s, fx := Step(Config{}, s, RotationFailed{Reason: "port web/api/8080: no such port"}, t0)
	if s.Inhibited != "port web/api/8080: no such port" || !s.InhibitedSince.Equal(t0) || emitted(fx, messages.KindPublicationInhibited) != 1 {
		t.Fatalf("inhibited %q since %v, effects %+v", s.Inhibited, s.InhibitedSince, fx)
	}
	s, fx = Step(Config{}, s, RotationFailed{Reason: "again"}, t0.Add(1))
	if emitted(fx, messages.KindPublicationInhibited) != 0 || !s.InhibitedSince.Equal(t0) {
		t.Fatalf("said twice: %+v", fx)
	}
	s, fx = Step(Config{}, s, RotationApplied{}, t0.Add(2))
	if _, replan := effectOf[Replan](fx); s.Inhibited != "" || emitted(fx, messages.KindPublicationRestored) != 1 || !replan {
		t.Fatalf("not lifted: %q %+v", s.Inhibited, fx)
	}
	if _, fx = Step(Config{}, s, RotationApplied{}, t0.Add(3)); len(fx) != 0 {
		t.Fatalf("applied while not inhibited did %+v", fx)
	}
}

// SVC-30: a replica that asks to be withdrawn gets a Withdraw.
func TestSVC30WithdrawAsked(t *testing.T) {
	s := recoveryState()
	_, fx := Step(Config{}, s, Report{Status: messages.ReplicaStatus{ID: "a", Slot: 1, Withdraw: true}}, t0)
	if w, ok := effectOf[Withdraw](fx); !ok || w.ID != "a" {
		t.Fatalf("no withdraw: %+v", fx)
	}
	_, fx = Step(Config{}, s, Report{Status: messages.ReplicaStatus{ID: "a", Slot: 1}}, t0)
	if _, ok := effectOf[Withdraw](fx); ok {
		t.Fatalf("withdraw unasked: %+v", fx)
	}
}

// SVC-33: a failed retirement is recorded once; the record goes when the
// replica ends after deleting its instance, or when adoption finds the
// instance gone, and stays when the actor ended otherwise.
func TestSVC33RetirementRecorded(t *testing.T) {
	s := recoveryState()
	rep := messages.ReplicaStatus{ID: "b", Slot: 2, Instance: "web-api-2-b", RetireError: "stop: injected fault"}
	s, fx := Step(Config{}, s, Report{Status: rep}, t0)
	rec, ok := effectOf[RecordRetirement](fx)
	if !ok || rec.Retirement.Instance != "web-api-2-b" || rec.Retirement.Slot != 2 || emitted(fx, messages.KindRetirementPending) != 1 {
		t.Fatalf("not recorded: %+v", fx)
	}
	if got := RetirementsPending(s); len(got) != 1 || got[0] != "web-api-2-b (slot 2): stop: injected fault" {
		t.Fatalf("status %v", got)
	}
	s, fx = Step(Config{}, s, Report{Status: rep}, t0)
	if _, ok := effectOf[RecordRetirement](fx); ok {
		t.Fatal("recorded twice")
	}
	kept, fx := Step(Config{}, s, Exited{ID: "b"}, t0)
	if _, ok := effectOf[ClearRetirement](fx); ok || len(kept.Retirements) != 1 {
		t.Fatalf("a non-final end cleared the record: %+v", fx)
	}
	gone, fx := Step(Config{}, s, Exited{ID: "b", Final: true}, t0)
	if c, ok := effectOf[ClearRetirement](fx); !ok || c.ID != "b" || len(gone.Retirements) != 0 {
		t.Fatalf("a final end kept the record: %+v", fx)
	}

	// At boot: recalled, then adoption finds "b" but not "z".
	boot := State{Target: s.Target, Replicas: map[string]Replica{}, Failed: map[string]bool{}}
	boot, _ = Step(Config{}, boot, RecallRetirements{Pending: []Retirement{{ID: "b", Slot: 2}, {ID: "z", Slot: 3}}}, t0)
	boot, _ = Step(Config{}, boot, Spawned{Replica: Replica{ID: "b", Slot: 2, Revision: "r1", Retiring: true, Intent: messages.IntentRetire}}, t0)
	boot, fx = Step(Config{}, boot, Adopted{}, t0)
	if c, ok := effectOf[ClearRetirement](fx); !ok || c.ID != "z" || len(boot.Retirements) != 1 {
		t.Fatalf("adoption: %+v, pending %v", fx, boot.Retirements)
	}
	// The slot of the pending one gets no new instance while it is there.
	for _, f := range fx {
		if sp, ok := f.(Spawn); ok && sp.Slot == 2 {
			t.Fatalf("slot 2 filled while its retirement is pending: %+v", fx)
		}
	}
}

// SVC-30, SVC-33 as properties of the core: Inhibited follows the last
// rotation outcome and each change of it is announced once; the pending
// retirements are exactly those recorded and not cleared, and Step never
// changes the state it was given.
func TestSVC30SVC33RecoveryProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := recoveryState()
		recorded := map[string]bool{}
		failing := false
		ids := []string{"a", "b", "c"}
		for i := 0; i < 60; i++ {
			var e Event
			switch rapid.IntRange(0, 4).Draw(t, "event") {
			case 0:
				e = RotationFailed{Reason: rapid.SampledFrom([]string{"x", "y"}).Draw(t, "reason")}
			case 1:
				e = RotationApplied{}
			case 2:
				id := rapid.SampledFrom(ids).Draw(t, "id")
				e = Report{Status: messages.ReplicaStatus{ID: id, Slot: s.Replicas[id].Slot, InRotation: rapid.Bool().Draw(t, "rot"),
					Withdraw: rapid.Bool().Draw(t, "withdraw"), RetireError: rapid.SampledFrom([]string{"", "stop: boom"}).Draw(t, "err")}}
			case 3:
				e = Exited{ID: rapid.SampledFrom(ids).Draw(t, "id"), Final: rapid.Bool().Draw(t, "final")}
			default:
				e = Tick{}
			}
			before := copyMaps(s)
			prev := s
			var fx []step.Effect
			s, fx = Step(Config{}, s, e, t0)
			if len(prev.Retirements) != len(before.Retirements) || prev.Inhibited != before.Inhibited {
				t.Fatalf("Step changed its input")
			}
			switch e.(type) {
			case RotationFailed:
				if !failing != (emitted(fx, messages.KindPublicationInhibited) == 1) {
					t.Fatalf("inhibition announced wrongly: %+v", fx)
				}
				failing = true
			case RotationApplied:
				if failing != (emitted(fx, messages.KindPublicationRestored) == 1) {
					t.Fatalf("restoration announced wrongly: %+v", fx)
				}
				failing = false
			}
			if failing != (s.Inhibited != "") {
				t.Fatalf("inhibited %q, last rotation failed %v", s.Inhibited, failing)
			}
			for _, f := range fx {
				switch f := f.(type) {
				case RecordRetirement:
					recorded[f.Retirement.ID] = true
				case ClearRetirement:
					delete(recorded, f.ID)
				}
			}
			if len(recorded) != len(s.Retirements) {
				t.Fatalf("recorded %v, state %v", recorded, s.Retirements)
			}
			for id := range recorded {
				if _, ok := s.Retirements[id]; !ok {
					t.Fatalf("recorded %v, state %v", recorded, s.Retirements)
				}
			}
		}
	})
}
