package host

import (
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/messages"
)

// Route routes a hibernating host to its host actor. The host actor
// publishes it when it starts and whenever its state changes.
type Route struct {
	Host    string
	Stack   string
	Service string
	// Engine and PID reach the host actor for wakes.
	Engine *actor.Engine
	PID    *actor.PID
	// Gate admits requests while the host serves.
	Gate *Gate
	// WakeTimeout bounds a request's wait for a wake (ACT-3, default 30s).
	WakeTimeout time.Duration
	// Status is the host's snapshot when the route was published.
	Status messages.HostStatus
}

// WaitingRoute stands for a host whose actor ended and waits out its
// backoff until next (SUP-21): it has no actor to wake (PID nil), its gate
// stays sealed, and its status says why and when it comes back, so the
// host stays in status and the edge answers 503 with Retry-After, not 404.
func WaitingRoute(def messages.HostDefinition, why string, failures int, next, now time.Time) Route {
	h := def.Definition.Hibernate
	return Route{Host: h.Host, Stack: def.Stack, Service: def.Service, Gate: NewGate(),
		Status: messages.HostStatus{Host: h.Host, Stack: def.Stack, Service: def.Service, Revision: def.Revision,
			Deployment: def.Deployment, State: messages.HostRestarting, Since: now, NextAttempt: next,
			LastError: fmt.Sprintf("host actor ended (%s), failure %d; it starts again at %s", why, failures, next.UTC().Format(time.RFC3339))}}
}
