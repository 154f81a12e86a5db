package service

import (
	"fmt"
	"sort"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Update is the rollout shape (SVC-12, SVC-13).
type Update struct {
	Parallelism   int // 0 = all at once
	Delay         time.Duration
	Order         string // stop-first | start-first
	FailureAction string // pause | rollback | continue
	Monitor       time.Duration
	// Strategy is rolling (batches, SVC-12) or recreate (every slot at
	// once, SVC-25); empty is rolling.
	Strategy string
}

// recreate: the target replaces every instance at once (SVC-25).
func (u Update) recreate() bool { return u.Strategy == stackfile.RolloutRecreate }

// Target is the definition the service converges to.
type Target struct {
	Deployment string
	Revision   string
	Replicas   int
	Update     Update
	// Deadline is how long a new instance may take to serve (SVC-13).
	Deadline time.Duration
	// Immediate is the ladder's count of failures retried at once (SUP-10):
	// a slot with that many failures and not yet stable is crash-looping.
	Immediate int
}

func (t Target) key() string { return t.Deployment + "/" + t.Revision }

// Replica is the service's view of one replica actor.
type Replica struct {
	ID         string
	Slot       int
	Revision   string
	Deployment string
	Phase      string
	InRotation bool
	// SpawnedAt is when the service created the replica actor; the SVC-13
	// deadline counts from here.
	SpawnedAt time.Time
	Intent    messages.Intent
	// Retiring: the service has started retiring it (draining or stopping).
	Retiring bool
	// Failures is the slot's ladder count; LastError why it last failed;
	// NextAttempt when the ladder lets it start again.
	Failures    int
	LastError   string
	NextAttempt time.Time
	// Health is the probe status (none, starting, healthy, unhealthy) and
	// Probe the last probe's output.
	Health string
	Probe  string
	// ServingSince is when it last came into rotation.
	ServingSince time.Time
	// Leaving: the replica gave up its instance (missing or replaced) and
	// no longer holds its slot.
	Leaving bool
}

func (r Replica) serving() bool { return r.InRotation && !r.Retiring && !r.Leaving }

// Rollout is a rollout under way.
type Rollout struct {
	Target      Target
	From        string // the revision being replaced
	Batch       []int
	BatchAt     time.Time
	Seen        map[int]time.Time // slot -> when its new instance was first seen serving
	Done        map[int]bool
	NextBatchAt time.Time
	Paused      bool
	Message     string
}

// atBoundary says whether a deployment may supersede the rollout now
// (SVC-14): there is none, no batch is in flight, or it paused (a paused
// rollout has nothing in flight and would otherwise hold a new deployment
// back for good).
func (ro *Rollout) atBoundary() bool {
	return ro == nil || ro.Paused || len(ro.Batch) == 0
}

// State is everything the planner knows about a service.
type State struct {
	Target   Target
	Previous *Target
	Pending  *Target // a deployment that supersedes at the next batch boundary
	Replicas map[string]Replica
	Rollout  *Rollout
	Failed   map[string]bool // deployment/revision keys that failed (SVC-14)
	Stopped  bool
	// DepsMet: depends_on was met once; it is never gated again (SVC-18).
	DepsMet bool
	// Adopted: the instances the driver had were listed and adopted; no
	// planning happens before, so nothing is created twice.
	Adopted bool
	// Defined is the revision of the last definition the stack sent.
	Defined string
	// Deps is the last status of each dependency (SVC-18).
	Deps map[string]messages.DependencyStatus
	// Alarm is the service-level health alarm (SVC-20).
	Alarm Alarm
	// Removed: the service retires everything and then ends.
	Removed bool
	// WakeAt is when WakeTimer is armed to fire; zero when it is not.
	WakeAt time.Time
	// Inhibited is why the service is publication-inhibited, since
	// InhibitedSince (SVC-30); Retirements are the retirements that failed
	// and are retried (SVC-33). recovery.go.
	Inhibited      string
	InhibitedSince time.Time
	Retirements    map[string]Retirement
	// PortsDown says which published ports do not listen, and why; "" when
	// all do (SVC-22). The service is failing while it is set, waiting when
	// PortsHandOver says each is held by another service of the stack.
	PortsDown     string
	PortsHandOver bool
}

// Config is what the core takes from the service's latest definition
// besides its targets.
type Config struct {
	// UnhealthyAfter is how long a service that was healthy may have no
	// healthy replica before health.unhealthy (SVC-20).
	UnhealthyAfter time.Duration
	// DependsOn are the services it waits for before it creates anything
	// (SVC-18).
	DependsOn []stackfile.Dependency
}

// WakeTimer is the service's one timer: plan again at the next deadline
// (a batch's deadline, monitor or delay, the health alarm, a settling
// window).
const WakeTimer = "wake"

// Step is the service core (layers.md, "One Step/Effect contract"): the
// new state and the effects the actor performs, for event e at now. It
// reads no clock and does no I/O; s is not changed.
func Step(cfg Config, s State, e Event, now time.Time) (State, []step.Effect) {
	return fold(cfg, copyMaps(s), e, now)
}

// fold is Step on a state whose maps it may change in place: the actor's
// own, which it replaces with the result and never reads again. Step
// copies every map first, which cost the actor a copy of all its replicas
// per event: at 100 replicas a service, a third of the CPU of converging
// 100,000 and most of the garbage (PERF-3).
func fold(cfg Config, s State, e Event, now time.Time) (State, []step.Effect) {
	if s.Replicas == nil {
		s.Replicas = map[string]Replica{}
	}
	if s.Failed == nil {
		s.Failed = map[string]bool{}
	}
	if s.Deps == nil {
		s.Deps = map[string]messages.DependencyStatus{}
	}
	if s2, fx, ok := stepRecovery(s, e, now); ok {
		return s2, fx
	}
	switch e := e.(type) {
	case SetTarget:
		return setTarget(s, e.Target, e.Previous), nil
	case Define:
		s, fx := redefine(s, e.Target, e.Previous)
		return s, append(fx, Replan{})
	case Recall:
		for k := range e.Failed {
			s.Failed[k] = true
		}
		return s, nil
	case Spawned:
		s.Replicas[e.Replica.ID] = e.Replica
		return s, nil
	case Adopted:
		s.Adopted = true
		s, fx := adoptedRecovery(s)
		s, more := pass(cfg, s, now)
		return s, append(fx, more...)
	case Report:
		s, fx := reportRecovery(s, e.Status, now)
		s, more := report(s, e.Status)
		return s, append(fx, more...)
	case Exited:
		delete(s.Replicas, e.ID)
		s, fx := exitedRecovery(s, e)
		return s, append(fx, Replan{})
	case Dependency:
		s.Deps[e.Status.Service] = e.Status
		return s, []step.Effect{Replan{}}
	case SetStopped:
		return setStopped(s, e.Stopped)
	case Retry:
		return s, []step.Effect{ClearBackoff{}}
	case Remove:
		s.Removed = true
		return s, []step.Effect{Replan{}}
	case Tick:
		return pass(cfg, s, now)
	case Fired:
		if e.Timer != WakeTimer {
			return s, []step.Effect{step.Refuse{Reason: fmt.Sprintf("no timer %q", e.Timer)}}
		}
		s.WakeAt = time.Time{}
		return pass(cfg, s, now)
	}
	return s, []step.Effect{step.Refuse{Reason: fmt.Sprintf("unknown event %T", e)}}
}

// report takes a replica's status; a report of a replica the service no
// longer has is dropped.
func report(s State, m messages.ReplicaStatus) (State, []step.Effect) {
	r, ok := s.Replicas[m.ID]
	if !ok {
		return s, nil
	}
	r.Phase, r.InRotation = m.Phase, m.InRotation && !r.Retiring
	r.Failures, r.LastError, r.NextAttempt = m.Ledger.Failures, m.LastError, m.Ledger.NextAttempt
	if r.LastError == "" {
		r.LastError = m.Ledger.LastReason // a restarted replica actor starts without one
	}
	r.Health, r.Probe, r.ServingSince = m.Health, m.LastProbe, m.ServingSince
	if m.Replace {
		r.Leaving, r.InRotation = true, false
	}
	s.Replicas[m.ID] = r
	return s, []step.Effect{Replan{}}
}

// setStopped takes the operator's stopped intent (SVC-10); the same
// intent again changes nothing.
func setStopped(s State, stopped bool) (State, []step.Effect) {
	if s.Stopped == stopped {
		return s, nil
	}
	s.Stopped = stopped
	kind, msg := messages.KindServiceStarted, "started by the operator"
	if stopped {
		kind, msg = messages.KindServiceStopped, "stopped by the operator"
	}
	return s, []step.Effect{step.Emit{Kind: kind, Level: messages.LevelInfo, Message: msg}, Replan{}}
}

// pass is one planning pass: the plan, the health alarm, the wake timer
// and the snapshot, or the removal.
func pass(cfg Config, s State, now time.Time) (State, []step.Effect) {
	if s.Removed {
		return removal(s)
	}
	s.DepsMet = s.DepsMet || depsMet(cfg, s.Deps)
	s, fx := plan(s, now)
	sum := Summarize(s, "", now)
	var more []step.Effect
	s.Alarm, more = s.Alarm.watch(sum.Steady, s.Rollout != nil, now, cfg.UnhealthyAfter)
	fx = append(fx, more...)
	if !sum.Recheck.IsZero() {
		fx = append(fx, wake{At: sum.Recheck})
	}
	s, fx = armWake(s, fx)
	return s, append(fx, Publish{})
}

// depsMet: every dependency has a running replica (service_started) or a
// healthy one (service_healthy) (SVC-18).
func depsMet(cfg Config, deps map[string]messages.DependencyStatus) bool {
	for _, d := range cfg.DependsOn {
		st := deps[d.Service]
		if d.Condition == stackfile.ConditionHealthy && st.Healthy == 0 || st.Running == 0 && st.Healthy == 0 {
			return false
		}
	}
	return true
}

// removal retires every instance, once they were adopted (so instances
// found on the driver go too); with none left the service ends.
func removal(s State) (State, []step.Effect) {
	if !s.Adopted {
		return s, nil
	}
	var fx []step.Effect
	for _, r := range sorted(s.Replicas) {
		if !r.Retiring {
			fx = append(fx, retire(&s, r.ID))
		}
	}
	fx = append(fx, Publish{})
	if len(s.Replicas) == 0 {
		fx = append(fx, Shutdown{}, step.End{})
	}
	return s, fx
}

// armWake folds a pass's wakes into one step.Arm of WakeTimer at the
// earliest of them, made only when that is earlier than the time the timer
// is armed for already.
func armWake(s State, fx []step.Effect) (State, []step.Effect) {
	var at time.Time
	out := make([]step.Effect, 0, len(fx)+1)
	for _, f := range fx {
		if w, ok := f.(wake); ok {
			at = earliest(at, w.At)
			continue
		}
		out = append(out, f)
	}
	if at.IsZero() || !s.WakeAt.IsZero() && !at.Before(s.WakeAt) {
		return s, out
	}
	s.WakeAt = at
	return s, append(out, step.Arm{Timer: WakeTimer, At: at})
}

// redefine takes the service's definition from the stack. Only a new
// revision of this service (its definition changed, a redeploy, a stack
// rollback) clears the backoff (SUP-17). A deployment that changed other
// services of the stack, or only this one's replica count or update
// settings, leaves its ladders, a rollback it made and a revision that
// failed as they are.
func redefine(s State, t Target, prev *Target) (State, []step.Effect) {
	if s.Defined != "" && s.Defined == t.Revision {
		return sameRevision(s, t)
	}
	first := s.Defined == ""
	s.Defined = t.Revision
	s = setTarget(s, t, prev)
	if first {
		return s, nil
	}
	return s, []step.Effect{ClearBackoff{}}
}

// sameRevision takes a definition whose revision did not change: the new
// deployment id, replica count and settings apply to what the planner is
// doing now.
func sameRevision(s State, t Target) (State, []step.Effect) {
	switch {
	case s.Pending != nil:
		p := t
		s.Pending = &p
		return s, nil
	case s.Target.Revision != t.Revision:
		// Rolled back (SVC-13): it stays on the revision it went back to.
		rev := s.Target.Revision
		s.Target, s.Target.Revision = t, rev
		return s, nil
	}
	var fx []step.Effect
	if s.Failed[s.Target.key()] && !s.Failed[t.key()] {
		// Still the revision that failed: it is not retried (SVC-13, SVC-14).
		s.Failed[t.key()] = true
		fx = append(fx, MarkFailed{Target: t})
	}
	if s.Rollout != nil && s.Rollout.Target.Revision == t.Revision {
		s.Rollout.Target = t
	}
	s.Target = t
	return s, fx
}

// setTarget takes a new definition. Mid-batch it waits for the batch
// boundary (SVC-14). A definition whose (deployment, revision) failed before
// is not rolled out again: with rollback it goes straight to the previous.
func setTarget(s State, t Target, prev *Target) State {
	if !s.Rollout.atBoundary() && s.Rollout.Target.Revision != t.Revision {
		s.Pending, s.Previous = &t, prev
		return s
	}
	s.Target, s.Previous, s.Pending = t, prev, nil
	if s.Rollout != nil && s.Rollout.Target.key() != t.key() {
		s.Rollout = nil
	}
	return s
}

// plan decides what to do now. It changes s's maps: fold's caller owns
// them.
func plan(s State, now time.Time) (State, []step.Effect) {
	if !s.Adopted {
		return s, nil
	}
	var acts []step.Effect
	acts = append(acts, intents(s)...)
	if s.Stopped {
		return s, acts
	}
	if s.Pending != nil && s.Rollout.atBoundary() {
		acts = append(acts, step.Emit{Kind: messages.KindRolloutSuperseded, Level: messages.LevelInfo,
			Message: fmt.Sprintf("deployment %s supersedes %s", s.Pending.Deployment, s.Target.Deployment)})
		s.Target, s.Pending, s.Rollout = *s.Pending, nil, nil
	}
	s, more := avoidFailed(s)
	acts = append(acts, more...)
	s, more = retireExtra(s)
	acts = append(acts, more...)
	s, more = cleanup(s)
	acts = append(acts, more...)
	if !s.DepsMet {
		return s, acts
	}
	s, more = fill(s, now)
	acts = append(acts, more...)
	s, more = rollout(s, now)
	return s, append(acts, more...)
}

func copyMaps(s State) State {
	reps := make(map[string]Replica, len(s.Replicas))
	for k, v := range s.Replicas {
		reps[k] = v
	}
	s.Replicas = reps
	failed := make(map[string]bool, len(s.Failed))
	for k, v := range s.Failed {
		failed[k] = v
	}
	s.Failed = failed
	deps := make(map[string]messages.DependencyStatus, len(s.Deps))
	for k, v := range s.Deps {
		deps[k] = v
	}
	s.Deps = deps
	s.Retirements = copyRetirements(s.Retirements)
	if s.Rollout != nil {
		r := *s.Rollout
		r.Seen, r.Done = copyTimes(r.Seen), copyBools(r.Done)
		r.Batch = append([]int(nil), r.Batch...)
		s.Rollout = &r
	}
	return s
}

func copyTimes(m map[int]time.Time) map[int]time.Time {
	out := make(map[int]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyBools(m map[int]bool) map[int]bool {
	out := make(map[int]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// intents keeps every replica's intent in line with the stopped intent
// (SVC-10).
func intents(s State) []step.Effect {
	want := messages.IntentRun
	if s.Stopped {
		want = messages.IntentStop
	}
	var change []Replica // few or none: a pass does not sort them all (PERF-3)
	for _, r := range s.Replicas {
		if !r.Retiring && !r.Leaving && r.Intent != want {
			change = append(change, r)
		}
	}
	sortReplicas(change)
	var acts []step.Effect
	for _, r := range change {
		r.Intent = want
		s.Replicas[r.ID] = r
		acts = append(acts, SetIntent{ID: r.ID, Intent: want})
	}
	return acts
}

// avoidFailed: a target whose (deployment, revision) failed with rollback
// goes back to the previous definition at once (SVC-14).
func avoidFailed(s State) (State, []step.Effect) {
	if !s.Failed[s.Target.key()] || s.Target.Update.FailureAction != "rollback" || s.Previous == nil ||
		s.Failed[s.Previous.key()] {
		return s, nil
	}
	failed := s.Target
	s.Target, s.Previous, s.Rollout = *s.Previous, &failed, nil
	return s, []step.Effect{step.Emit{Kind: messages.KindRolloutRolledBack, Level: messages.LevelWarn, Fingerprint: rolledBack(failed, s.Target),
		Message: fmt.Sprintf("revision %s of deployment %s failed before; back to %s", failed.Revision, failed.Deployment, s.Target.Revision)}}
}

// retireExtra retires every instance in a slot above the replica count,
// highest first (SVC-15, SVC-17).
func retireExtra(s State) (State, []step.Effect) {
	var extra []Replica
	for _, r := range s.Replicas {
		if r.Slot > s.Target.Replicas && !r.Retiring && !r.Leaving {
			extra = append(extra, r)
		}
	}
	sortReplicas(extra)
	var acts []step.Effect
	for i := len(extra) - 1; i >= 0; i-- {
		acts = append(acts, retire(&s, extra[i].ID))
	}
	return s, acts
}

func retire(s *State, id string) Retire {
	r := s.Replicas[id]
	r.Retiring, r.InRotation = true, false
	s.Replicas[id] = r
	return Retire{ID: id, Slot: r.Slot}
}

// slot groups the replicas that hold one slot.
type slot struct {
	current, old []Replica // not retiring
	occupied     bool      // any replica holds it, retiring ones included
}

// plain reports whether every instance (retiring and leaving ones aside)
// is of the current revision, at most one to a slot: cleanup then has
// nothing to do, nor has a rollout when none is under way, and the
// planner does not group the replicas by slot (PERF-3: slots made half
// the garbage of converging 100,000 replicas).
func plain(s State) bool {
	top := 0
	for _, r := range s.Replicas {
		if r.Leaving || r.Retiring {
			continue
		}
		if r.Revision != s.Target.Revision || r.Slot < 0 {
			return false
		}
		top = max(top, r.Slot)
	}
	seen := make([]bool, top+1)
	for _, r := range s.Replicas {
		if r.Leaving || r.Retiring {
			continue
		}
		if seen[r.Slot] {
			return false
		}
		seen[r.Slot] = true
	}
	return true
}

// slots groups the replicas by slot, each slot's in ID order. It does
// not sort every replica: a planning pass calls it three times (PERF-3).
func slots(s State) map[int]*slot {
	out := make(map[int]*slot, len(s.Replicas))
	all := make([]slot, 0, len(s.Replicas)) // one allocation for every slot
	for _, r := range s.Replicas {
		if r.Leaving {
			continue
		}
		sl := out[r.Slot]
		if sl == nil {
			all = append(all, slot{})
			sl = &all[len(all)-1]
			out[r.Slot] = sl
		}
		sl.occupied = true
		switch {
		case r.Retiring:
		case r.Revision == s.Target.Revision:
			sl.current = append(sl.current, r)
		default:
			sl.old = append(sl.old, r)
		}
	}
	for i := range all {
		sortReplicas(all[i].current)
		sortReplicas(all[i].old)
	}
	return out
}

// cleanup (SVC-15): an old instance beside a serving current one is
// removed; of two current instances in one slot one is kept.
func cleanup(s State) (State, []step.Effect) {
	if plain(s) {
		return s, nil
	}
	var acts []step.Effect
	occ := slots(s)
	for _, n := range slotNumbers(occ) {
		sl := occ[n]
		if len(sl.current) > 1 {
			keep := best(sl.current)
			for _, r := range sl.current {
				if r.ID != keep.ID {
					acts = append(acts, retire(&s, r.ID))
				}
			}
			sl.current = []Replica{keep}
		}
		if len(sl.current) == 1 && sl.current[0].serving() {
			for _, r := range sl.old {
				acts = append(acts, retire(&s, r.ID))
			}
		}
	}
	return s, acts
}

// best picks the instance to keep of several in one slot: serving first,
// then the oldest.
func best(rs []Replica) Replica {
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].serving() != rs[j].serving() {
			return rs[i].serving()
		}
		if !rs[i].SpawnedAt.Equal(rs[j].SpawnedAt) {
			return rs[i].SpawnedAt.Before(rs[j].SpawnedAt)
		}
		return rs[i].ID < rs[j].ID
	})
	return rs[0]
}

// fill gives every slot that nobody holds a fresh instance of the current
// revision: a new slot, a slot whose instance is gone, or one whose old
// instance a stop-first batch has retired. A slot with no old instance to
// protect keeps retrying on the replica's ladder (SVC-13).
func fill(s State, now time.Time) (State, []step.Effect) {
	if holdForRecreate(s) {
		return s, nil
	}
	var acts []step.Effect
	held := make([]bool, s.Target.Replicas+1) // any replica holds it, retiring ones included
	for _, r := range s.Replicas {
		if !r.Leaving && r.Slot >= 1 && r.Slot <= s.Target.Replicas {
			held[r.Slot] = true
		}
	}
	for n := 1; n <= s.Target.Replicas; n++ {
		if !held[n] {
			acts = append(acts, Spawn{Slot: n, Target: s.Target})
		}
	}
	return s, acts
}

// rollout replaces old instances in batches (SVC-12..SVC-14).
func rollout(s State, now time.Time) (State, []step.Effect) {
	if s.Rollout == nil && plain(s) {
		return s, nil // no slot holds an old instance: nothing pending
	}
	occ := slots(s)
	pending := pendingSlots(s, occ)
	if s.Rollout == nil {
		if len(pending) == 0 {
			return s, nil
		}
		if s.Failed[s.Target.key()] && s.Target.Update.FailureAction != "continue" {
			return s, nil // paused: not retried until the definition changes
		}
		s.Rollout = &Rollout{Target: s.Target, From: oldRevision(occ), Seen: map[int]time.Time{}, Done: map[int]bool{}}
		msg := fmt.Sprintf("rolling out revision %s over %d slots", s.Target.Revision, len(pending))
		if s.Target.Update.recreate() {
			msg = fmt.Sprintf("recreating revision %s: %d old instance(s) stop together, then every slot starts", s.Target.Revision, len(pending))
		}
		return batch(s, now, occ, pending, []step.Effect{step.Emit{Kind: messages.KindRolloutStarted, Level: messages.LevelInfo, Message: msg}})
	}
	ro := s.Rollout
	if ro.Paused {
		return s, nil
	}
	if len(ro.Batch) > 0 {
		return watchBatch(s, now, occ)
	}
	if len(pending) == 0 {
		s.Rollout = nil
		return s, []step.Effect{step.Emit{Kind: messages.KindDeploySucceeded, Level: messages.LevelInfo,
			Message: fmt.Sprintf("revision %s serves in every slot", s.Target.Revision)}}
	}
	if now.Before(ro.NextBatchAt) {
		return s, []step.Effect{wake{At: ro.NextBatchAt}}
	}
	return batch(s, now, occ, pending, nil)
}

// pendingSlots are the slots (up to the replica count) whose only instances
// are of an old revision and not yet done.
func pendingSlots(s State, occ map[int]*slot) []int {
	var out []int
	for n := 1; n <= s.Target.Replicas; n++ {
		sl := occ[n]
		if sl == nil || len(sl.old) == 0 {
			continue
		}
		if len(sl.current) == 1 && sl.current[0].serving() {
			continue
		}
		out = append(out, n)
	}
	return out
}

func oldRevision(occ map[int]*slot) string {
	for _, n := range slotNumbers(occ) {
		if sl := occ[n]; len(sl.old) > 0 {
			return sl.old[0].Revision
		}
	}
	return ""
}

// batch starts the next batch of pending slots.
func batch(s State, now time.Time, occ map[int]*slot, pending []int, acts []step.Effect) (State, []step.Effect) {
	ro := s.Rollout
	n := s.Target.Update.Parallelism
	if n <= 0 || n > len(pending) {
		n = len(pending)
	}
	if s.Target.Update.recreate() {
		n = len(pending) // every slot in one batch (SVC-25)
	}
	ro.Batch, ro.BatchAt = append([]int(nil), pending[:n]...), now
	for _, sn := range ro.Batch {
		sl := occ[sn]
		if s.Target.Update.Order == "start-first" && !s.Target.Update.recreate() {
			if len(sl.current) == 0 {
				acts = append(acts, Spawn{Slot: sn, Target: s.Target})
			}
			continue
		}
		for _, r := range sl.old {
			acts = append(acts, retire(&s, r.ID))
		}
	}
	return s, acts
}

// watchBatch checks the batch's new instances: each must serve within its
// deadline and then stay in rotation through the monitor window (SVC-13).
func watchBatch(s State, now time.Time, occ map[int]*slot) (State, []step.Effect) {
	ro := s.Rollout
	var next time.Time
	var acts []step.Effect
	done := true
	for _, sn := range ro.Batch {
		sl := occ[sn]
		var cur *Replica
		if sl != nil && len(sl.current) > 0 {
			cur = &sl.current[0]
		}
		// From the batch's start: a replica replaced over and over in the
		// slot does not restart the clock (SUP-15).
		deadline := ro.BatchAt.Add(s.Target.Deadline)
		switch {
		case cur == nil && !now.Before(deadline):
			return fail(s, now, fmt.Sprintf("slot %d did not become healthy within %s", sn, s.Target.Deadline))
		case cur == nil:
			// stop-first: the old is still retiring; start-first: the new
			// one gave up its instance and the slot needs another.
			done = false
			next = earliest(next, deadline)
			if s.Target.Update.Order == "start-first" && !s.Target.Update.recreate() && sl != nil && len(sl.old) > 0 {
				acts = append(acts, Spawn{Slot: sn, Target: s.Target})
			}
		case cur.serving():
			if _, ok := ro.Seen[sn]; !ok {
				ro.Seen[sn] = now
			}
			until := ro.Seen[sn].Add(s.Target.Update.Monitor)
			if now.Before(until) || len(sl.old) > 0 {
				done = false
				next = earliest(next, until)
			}
		case !ro.Seen[sn].IsZero():
			return fail(s, now, fmt.Sprintf("slot %d left rotation during the %s monitor", sn, s.Target.Update.Monitor))
		case cur.Health == "unhealthy":
			// Its healthcheck failed `retries` times after start_period:
			// the batch fails now, not at the deadline (SVC-13).
			return fail(s, now, fmt.Sprintf("slot %d turned unhealthy: %s", sn, orUnknown(cur.Probe)))
		default:
			if !now.Before(deadline) {
				return fail(s, now, fmt.Sprintf("slot %d did not become healthy within %s", sn, s.Target.Deadline))
			}
			done = false
			next = earliest(next, deadline)
		}
	}
	if !done {
		if !next.IsZero() {
			acts = append(acts, wake{At: next})
		}
		return s, acts
	}
	for _, sn := range ro.Batch {
		ro.Done[sn] = true
	}
	ro.Batch, ro.NextBatchAt = nil, now.Add(s.Target.Update.Delay)
	acts = append(acts, SaveProgress{Target: ro.Target, Done: doneSlots(ro)})
	// A batch boundary: a superseding deployment takes over here (SVC-14).
	s2, more := plan(s, now)
	return s2, append(acts, more...)
}

func doneSlots(ro *Rollout) []int {
	var out []int
	for n := range ro.Done {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// fail applies failure_action to a batch that failed (SVC-13).
func fail(s State, now time.Time, why string) (State, []step.Effect) {
	ro := s.Rollout
	acts := []step.Effect{MarkFailed{Target: ro.Target}, step.Emit{Kind: messages.KindDeployFailed, Level: messages.LevelError,
		Message: fmt.Sprintf("revision %s: %s", ro.Target.Revision, why)}}
	s.Failed[ro.Target.key()] = true
	switch ro.Target.Update.FailureAction {
	case "continue":
		for _, sn := range ro.Batch {
			ro.Done[sn] = true
		}
		ro.Batch, ro.NextBatchAt = nil, now.Add(s.Target.Update.Delay)
		return s, append(acts, wake{At: ro.NextBatchAt})
	case "rollback":
		if s.Previous != nil {
			failed := s.Target
			s.Target, s.Previous, s.Rollout = *s.Previous, &failed, nil
			acts = append(acts, step.Emit{Kind: messages.KindRolloutRolledBack, Level: messages.LevelWarn, Fingerprint: rolledBack(failed, s.Target),
				Message: fmt.Sprintf("rolled back to revision %s: %s", s.Target.Revision, why)})
			s2, more := plan(s, now)
			return s2, append(acts, more...)
		}
	}
	ro.Paused, ro.Message = true, why
	acts = append(acts, step.Emit{Kind: messages.KindRolloutPaused, Level: messages.LevelError,
		Message: fmt.Sprintf("rollout of revision %s paused: %s", ro.Target.Revision, why)})
	// A new instance that failed beside an old one still serving goes: the
	// old keeps serving (start-first keeps capacity).
	occ := slots(s)
	for _, sn := range ro.Batch {
		if sl := occ[sn]; sl != nil && len(sl.old) > 0 {
			for _, r := range sl.current {
				acts = append(acts, retire(&s, r.ID))
			}
		}
	}
	return s, acts
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason recorded"
	}
	return s
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func sorted(m map[string]Replica) []Replica {
	out := make([]Replica, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sortReplicas(out)
	return out
}

// sortReplicas orders rs by slot, then ID.
func sortReplicas(rs []Replica) {
	if len(rs) < 2 {
		return
	}
	sort.Slice(rs, func(i, j int) bool { return replicaBefore(rs[i], rs[j]) })
}

func replicaBefore(a, b Replica) bool {
	if a.Slot != b.Slot {
		return a.Slot < b.Slot
	}
	return a.ID < b.ID
}

func slotNumbers(m map[int]*slot) []int {
	out := make([]int, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}
