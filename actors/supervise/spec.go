package supervise

import (
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/supervise/ladder"
)

// RestartType says when a child is restarted (SUP-6).
type RestartType int

const (
	// Permanent children are always restarted.
	Permanent RestartType = iota
	// Transient children are restarted only after an abnormal end.
	Transient
	// Temporary children are never restarted.
	Temporary
)

func (r RestartType) String() string {
	switch r {
	case Permanent:
		return "permanent"
	case Transient:
		return "transient"
	case Temporary:
		return "temporary"
	}
	return fmt.Sprintf("restart(%d)", int(r))
}

// Strategy says which children restart when one fails (SUP-7).
type Strategy int

const (
	// OneForOne restarts only the failed child (the default).
	OneForOne Strategy = iota
	// OneForAll stops every child and restarts them all.
	OneForAll
	// RestForOne restarts the failed child and every child started after it.
	RestForOne
)

func (s Strategy) String() string {
	switch s {
	case OneForOne:
		return "one_for_one"
	case OneForAll:
		return "one_for_all"
	case RestForOne:
		return "rest_for_one"
	}
	return fmt.Sprintf("strategy(%d)", int(s))
}

// ParseStrategy reads a strategy's config name.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range []Strategy{OneForOne, OneForAll, RestForOne} {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("strategy %q: want one_for_one, one_for_all or rest_for_one", s)
}

// Producer makes a fresh receiver for one incarnation of an actor. The
// handle is the actor's link to the tree: its path, logger, clock, and, for
// supervisors, its children.
type Producer func(h *Handle) actor.Receiver

// ChildSpec declares one child of a supervisor.
type ChildSpec struct {
	// Name is unique among siblings and is the last segment of the child's
	// path, e.g. "service:api".
	Name     string
	Produce  Producer
	Restart  RestartType
	Shutdown time.Duration // budget; DefaultShutdown when zero
	// Ladder paces this child's restarts: a service's own
	// x-engenho.backoff for the actors of that service (SUP-20). The
	// supervisor's ladder when zero.
	Ladder ladder.Config
}

// DefaultShutdown is a child's shutdown budget when its spec gives none.
const DefaultShutdown = 5 * time.Second

// Intensity bounds restarts: more than MaxRestarts within Period ends the
// supervisor (SUP-8).
type Intensity struct {
	MaxRestarts int
	Period      time.Duration
}

// DefaultIntensity is 3 restarts in 5s.
func DefaultIntensity() Intensity { return Intensity{MaxRestarts: 3, Period: 5 * time.Second} }
