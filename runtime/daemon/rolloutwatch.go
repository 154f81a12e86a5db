package daemon

import (
	"slices"
	"strconv"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// rolloutWatch is the pure core of `apply --wait` (SVC-5): given the
// services an apply changed, it takes their status snapshots and the
// journal's events as they come and decides each service's verdict, once.
// It does no I/O; waitRollout feeds it.
//
// The rules:
//   - converged: the service's snapshot is at the deployment the apply
//     recorded and its state is converged (a removed service: it is gone).
//     A service the apply did not roll out (create, scale, reconfigure)
//     must stay converged through its update_config.monitor (default 5s):
//     a rollout monitors each new instance itself (SVC-13), a create has
//     nobody else to, and a process that crashes 0.2s after it started
//     is not converged;
//   - failed: a deploy.failed, rollout.paused or rollout.rolled_back event
//     of the service once it took the deployment; or its state at that
//     deployment is paused, failing, backoff (SVC-19) or any state that is
//     not on the way (starting, updating, waiting); or it moved on to
//     another deployment (a newer apply superseded it, an operator rolled
//     it back);
//   - an outcome never changes: a service that failed and then converged
//     on the previous revision (failure_action rollback) stays failed. Only
//     a failure its state decided takes the reason of the first failure
//     event that follows.
type rolloutWatch struct {
	targets []*watchTarget
}

type svcKey struct{ stack, service string }

type watchTarget struct {
	key        svcKey
	deployment string        // the deployment the apply recorded
	removed    bool          // the apply removes the service: done once it is gone
	monitor    time.Duration // how long converged must hold (0: at once)
	since      time.Time     // converged since (zero: not converged)
	seen       bool          // a snapshot showed the service at deployment
	last       messages.ServiceStatus
	shown      *progressKey
	verdict    control.ServiceVerdict
}

// failureKinds are the events that fail a watched service's rollout.
var failureKinds = map[string]bool{
	messages.KindDeployFailed:      true,
	messages.KindRolloutPaused:     true,
	messages.KindRolloutRolledBack: true,
}

// newRolloutWatch watches every changed service of plans; monitor gives a
// service's update_config.monitor (used unless the change is an update or
// a removal).
func newRolloutWatch(plans []control.StackPlan, monitor func(svcKey) time.Duration) *rolloutWatch {
	w := &rolloutWatch{}
	for _, p := range plans {
		for _, c := range p.Changes {
			if c.Action == stackfile.ActionUnchanged {
				continue
			}
			k := svcKey{p.Stack, c.Service}
			t := &watchTarget{key: k, deployment: p.Deployment, removed: c.Action == stackfile.ActionRemove,
				verdict: control.ServiceVerdict{Stack: k.stack, Service: k.service}}
			if c.Action != stackfile.ActionUpdate && !t.removed && monitor != nil {
				t.monitor = monitor(k)
			}
			w.targets = append(w.targets, t)
		}
	}
	return w
}

// keys are the watched services, in plan order.
func (w *rolloutWatch) keys() []svcKey {
	out := make([]svcKey, len(w.targets))
	for i, t := range w.targets {
		out[i] = t.key
	}
	return out
}

func (w *rolloutWatch) target(k svcKey) *watchTarget {
	for _, t := range w.targets {
		if t.key == k {
			return t
		}
	}
	return nil
}

// status takes a service's snapshot (ok false: the board has none) at
// now. It reports whether the snapshot moved (its state, counts or a slot
// changed) and so is worth showing.
func (w *rolloutWatch) status(k svcKey, svc messages.ServiceStatus, ok bool, now time.Time) bool {
	t := w.target(k)
	if t == nil || t.verdict.Outcome != control.OutcomeNone {
		return false
	}
	if t.removed {
		if !ok {
			t.verdict.Outcome, t.verdict.Reason = control.OutcomeConverged, "removed"
		}
		return false
	}
	if !ok {
		return false
	}
	if svc.Deployment != t.deployment {
		if t.seen || laterDeployment(svc.Deployment, t.deployment) {
			t.fail("now on deployment "+svc.Deployment+", not "+t.deployment, 0)
		}
		return false // a snapshot from before the service took the deployment
	}
	t.seen, t.last = true, svc
	if svc.State != messages.ServiceConverged {
		t.since = time.Time{}
	}
	switch svc.State {
	case messages.ServiceConverged:
		if t.since.IsZero() {
			t.since = now
		}
		if !now.Before(t.since.Add(t.monitor)) {
			t.verdict.Outcome = control.OutcomeConverged
		}
	case messages.ServiceStarting, messages.ServiceUpdating, messages.ServiceWaiting:
	default:
		reason := string(svc.State)
		if svc.Message != "" {
			reason += ": " + svc.Message
		}
		t.fail(reason, 0)
	}
	pk := progressOf(svc)
	if t.shown != nil && t.shown.equal(pk) {
		return false
	}
	t.shown = &pk
	return true
}

// event takes an event from the journal; it reports whether the event is
// about a watched service (and so part of the rollout's progress).
func (w *rolloutWatch) event(ev messages.Event) bool {
	t := w.target(svcKey{ev.Stack, ev.Service})
	if t == nil || ev.Service == "" {
		return false
	}
	// Before the service took the deployment, a failure event is an older
	// rollout's. A failure its state decided (it moved back to the old
	// deployment) takes the event's reason: it says why.
	undecided := t.verdict.Outcome == control.OutcomeNone
	statusFailed := t.verdict.Outcome == control.OutcomeFailed && t.verdict.Seq == 0
	if failureKinds[ev.Kind] && t.seen && (undecided || statusFailed) {
		t.fail(ev.Kind+": "+ev.Message, ev.Seq)
	}
	return true
}

// holding says, for a converged service whose monitor window runs, until
// when; the loop looks again then.
func (w *rolloutWatch) holding(k svcKey) (time.Time, bool) {
	t := w.target(k)
	if t == nil || t.verdict.Outcome != control.OutcomeNone || t.since.IsZero() {
		return time.Time{}, false
	}
	return t.since.Add(t.monitor), true
}

// nextLook is the earliest end of a running monitor window.
func (w *rolloutWatch) nextLook() (time.Time, bool) {
	var next time.Time
	for _, t := range w.targets {
		if until, ok := w.holding(t.key); ok && (next.IsZero() || until.Before(next)) {
			next = until
		}
	}
	return next, !next.IsZero()
}

func (t *watchTarget) fail(reason string, seq uint64) {
	t.verdict.Outcome, t.verdict.Reason, t.verdict.Seq = control.OutcomeFailed, reason, seq
}

// outcome is the one verdict once it is known: failed as soon as one
// service failed, converged once every one converged.
func (w *rolloutWatch) outcome() (control.Outcome, bool) {
	all := true
	for _, t := range w.targets {
		switch t.verdict.Outcome {
		case control.OutcomeFailed:
			return control.OutcomeFailed, true
		case control.OutcomeNone:
			all = false
		}
	}
	if all {
		return control.OutcomeConverged, true
	}
	return control.OutcomeNone, false
}

// verdicts lists every watched service's verdict, in plan order, and the
// last snapshot of each one that failed.
func (w *rolloutWatch) verdicts() ([]control.ServiceVerdict, []messages.ServiceStatus) {
	var out []control.ServiceVerdict
	var failed []messages.ServiceStatus
	for _, t := range w.targets {
		out = append(out, t.verdict)
		if t.verdict.Outcome == control.OutcomeFailed && t.last.Service != "" {
			failed = append(failed, t.last)
		}
	}
	return out, failed
}

// laterDeployment reports whether deployment a was recorded after b.
func laterDeployment(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

// progressKey is what a progress line shows of a service: its state,
// message and healthy count, and each slot's state (the rollout's, else
// each replica's phase).
type progressKey struct {
	state            messages.ServiceState
	message          string
	desired, healthy int
	slots            []string
}

func progressOf(s messages.ServiceStatus) progressKey {
	pk := progressKey{state: s.State, message: s.Message, desired: s.Desired, healthy: s.Healthy}
	if s.Rollout != nil {
		for _, sl := range s.Rollout.Slots {
			pk.slots = append(pk.slots, strconv.Itoa(sl.Slot)+" "+sl.State)
		}
		return pk
	}
	for _, r := range s.Replicas {
		pk.slots = append(pk.slots, strconv.Itoa(r.Slot)+" "+r.Phase)
	}
	return pk
}

func (a progressKey) equal(b progressKey) bool {
	return a.state == b.state && a.message == b.message && a.desired == b.desired && a.healthy == b.healthy &&
		slices.Equal(a.slots, b.slots)
}
