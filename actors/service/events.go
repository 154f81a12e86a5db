package service

import (
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Event is what the service core takes (Step). The actor turns its
// messages into events.
type Event interface{ serviceEvent() }

// SetTarget takes t as the target, with prev to go back to. Mid-batch it
// waits for the batch boundary (SVC-14). It is the primitive under Define
// and keeps no revision bookkeeping; the actor sends Define.
type SetTarget struct {
	Target   Target
	Previous *Target
}

// Define is the service's definition from the stack, which sends it again
// whenever the stack gets a new deployment. Only a new revision of this
// service clears the backoff (SUP-17).
type Define struct {
	Target   Target
	Previous *Target
}

// Recall gives the (deployment/revision) keys the journal remembers as
// failed (SVC-14).
type Recall struct{ Failed map[string]bool }

// Spawned: the actor started the replica actor of r (a Spawn it performed,
// or an instance it adopted).
type Spawned struct{ Replica Replica }

// Adopted: the instances the driver listed were all adopted; planning may
// start (SUP-9).
type Adopted struct{}

// Report is a replica's status report.
type Report struct{ Status messages.ReplicaStatus }

// Exited: the replica actor ID ended for good (not restarted by its
// supervisor). ID is empty when the child was none of the service's
// replicas.
type Exited struct {
	ID string
	// Final: its last report said it ended after retiring its instance.
	Final bool
}

// Dependency is how one of the services it depends on is doing (SVC-18).
type Dependency struct{ Status messages.DependencyStatus }

// SetStopped is the operator's durable stopped intent (SVC-10).
type SetStopped struct{ Stopped bool }

// Retry is the operator's retry: every replica's backoff is cleared
// (SUP-17).
type Retry struct{}

// Remove retires every instance; the service then ends.
type Remove struct{}

// Tick asks for a planning pass.
type Tick struct{}

// Fired: the named timer fired (as armed now). WakeTimer plans again.
type Fired struct{ Timer string }

func (SetTarget) serviceEvent()  {}
func (Define) serviceEvent()     {}
func (Recall) serviceEvent()     {}
func (Spawned) serviceEvent()    {}
func (Adopted) serviceEvent()    {}
func (Report) serviceEvent()     {}
func (Exited) serviceEvent()     {}
func (Dependency) serviceEvent() {}
func (SetStopped) serviceEvent() {}
func (Retry) serviceEvent()      {}
func (Remove) serviceEvent()     {}
func (Tick) serviceEvent()       {}
func (Fired) serviceEvent()      {}

// The service core's own effects; the shared ones (step.Arm of WakeTimer,
// step.Emit, step.End) are performed by supervise.Apply.

// Spawn starts a fresh replica of Target in Slot; the actor reports it
// back as Spawned.
type Spawn struct {
	step.Is
	Slot   int
	Target Target
}

// Retire takes replica ID out of rotation, drains its connections and then
// tells it to stop and delete its instance (SVC-16). The state already
// marks it retiring.
type Retire struct {
	step.Is
	ID   string
	Slot int
}

// SetIntent tells replica ID its intent (SVC-10).
type SetIntent struct {
	step.Is
	ID     string
	Intent messages.Intent
}

// SaveProgress records in the journal which slots of Target's rollout are
// done (SVC-14).
type SaveProgress struct {
	step.Is
	Target Target
	Done   []int
}

// MarkFailed records in the journal that Target's (deployment, revision)
// failed (SVC-14).
type MarkFailed struct {
	step.Is
	Target Target
}

// ClearBackoff clears every replica's ladder and spent restart policy
// (SUP-17).
type ClearBackoff struct{ step.Is }

// Replan asks for a Tick after the messages already queued: a burst of
// replica reports costs one pass.
type Replan struct{ step.Is }

// Publish gives the balancer the in-rotation replicas and puts the
// service's snapshot on the board (SUP-3, SVC-22).
type Publish struct{ step.Is }

// Shutdown closes the service's listeners, takes it off the board and
// tells the stack it is gone; a step.End follows.
type Shutdown struct{ step.Is }

// wake asks for a pass at At. Step folds a pass's wakes into one step.Arm
// of WakeTimer; it never leaves Step.
type wake struct {
	step.Is
	At time.Time
}
