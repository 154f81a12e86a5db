package host

import (
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
