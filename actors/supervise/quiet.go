package supervise

import (
	"sync"

	"github.com/engenho/engenho/messages"
)

// Subject is what an event is about: a stack, a service of it, one
// instance, or a host. Each subject has one announced state (SVC-26).
type Subject struct {
	Stack, Service, Instance, Host string
}

// SubjectOf is the subject of ev.
func SubjectOf(ev messages.Event) Subject {
	return Subject{Stack: ev.Stack, Service: ev.Service, Instance: ev.Instance, Host: ev.Host}
}

// Admit is the pure core of the quiet filter (SVC-26): given the
// fingerprint of what was last announced of ev's subject (empty when the
// last event about it reported an action, or there was none), it says
// whether ev is announced and what the subject's last announcement is
// then. An event that states what its subject is (it carries a
// Fingerprint: left down, rolled back, paused, unhealthy, the stack
// serving or failed) and finds the subject exactly as last announced is
// dropped: a reconcile pass that derives the same state again (an actor
// restarted, the daemon rebooted, an instance adopted) says nothing. Every
// other event is admitted and becomes the subject's last announcement, so
// a change of state is announced once, and so is the same state again
// after an action (a restart) or another state in between.
//
// An actor's restart or escalation (actor.*, SUP-18) is about the
// supervision tree, not the subject's state: it is always announced and
// leaves the subject's last announcement as it was, so the state a
// restarted actor derives again is still kept quiet.
func Admit(last string, ev messages.Event) (next string, admitted bool) {
	if ev.Kind == messages.KindActorRestarted || ev.Kind == messages.KindActorEscalated {
		return last, true
	}
	if ev.Fingerprint != "" && ev.Fingerprint == last {
		return last, false
	}
	return ev.Fingerprint, true
}

// Quiet is an Emitter that passes on only the events Admit admits. It is
// the node's, not an actor's, so it outlives actor restarts; the daemon
// seeds it from the event log at boot so it outlives daemon restarts too.
// It is safe for concurrent use.
type Quiet struct {
	next Emitter
	mu   sync.Mutex
	// last is what was last announced of each subject (Admit); a subject
	// whose last event was an action has no entry.
	last    map[Subject]string
	dropped uint64
}

// NewQuiet returns a quiet filter in front of next.
func NewQuiet(next Emitter) *Quiet { return &Quiet{next: next, last: map[Subject]string{}} }

// Seed replays events already announced (the log, oldest first), so the
// first pass after a restart finds them announced.
func (q *Quiet) Seed(evs []messages.Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ev := range evs {
		q.take(ev)
	}
}

// take is Admit on q's own map, changed in place (the lock is held).
func (q *Quiet) take(ev messages.Event) bool {
	sub := SubjectOf(ev)
	next, ok := Admit(q.last[sub], ev)
	if next == "" {
		delete(q.last, sub)
	} else {
		q.last[sub] = next
	}
	return ok
}

// Emit passes ev on unless its subject is exactly as last announced.
func (q *Quiet) Emit(ev messages.Event) {
	q.mu.Lock()
	ok := q.take(ev)
	if !ok {
		q.dropped++
	}
	q.mu.Unlock()
	if ok && q.next != nil {
		q.next.Emit(ev)
	}
}

// Dropped is how many events q kept quiet.
func (q *Quiet) Dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}
