package step

import (
	"time"

	"github.com/engenho/engenho/messages"
)

// Effect is something a core asks its shell to do. Every effect type
// embeds Is.
type Effect interface{ StepEffect() }

// Is marks a type as an Effect.
type Is struct{}

// StepEffect makes Is (and every type embedding it) an Effect.
func (Is) StepEffect() {}

// Arm asks for the named timer to fire at At. Arming a timer again
// replaces it, unless Keep is set and it is armed already: then it stays
// as it is.
type Arm struct {
	Is
	Timer string
	At    time.Time
	Keep  bool
}

// Cancel disarms the named timer; a timer that is not armed is no error.
type Cancel struct {
	Is
	Timer string
}

// Emit records an event. The shell stamps the time and what it knows of
// the actor (stack, service, instance, host, path). Host, when set, names
// the host the event is about instead of the actor's own (the activator's
// events concern many hosts).
type Emit struct {
	Is
	Kind    string
	Level   messages.Level
	Message string
	Fields  map[string]string
	Host    string
	// Fingerprint marks an event that states what its subject is; see
	// messages.Event.Fingerprint (SVC-26).
	Fingerprint string
}

// Refuse says an event was not taken, and why. The state is unchanged.
type Refuse struct {
	Is
	Reason string
}

// End asks the actor to end with Reason (ExitNormal when empty).
type End struct {
	Is
	Reason messages.ExitReason
}
