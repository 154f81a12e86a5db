package supervise

import (
	"strconv"
	"sync/atomic"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/rs/zerolog"
)

// InboxSize is the initial inbox of every actor. Hollywood's inbox grows on
// demand; its default of 1024 slots costs 24 KiB per idle actor, which at
// 100k actors is 2.4 GiB for nothing.
const InboxSize = 8

// System is what every cell of one tree shares: the engine, the clock, the
// base logger and the published tree.
type System struct {
	Engine *actor.Engine
	Clock  clock.Clock
	Log    zerolog.Logger
	Tree   *Tree
	// OnRootExit is called once when the root actor ends, with why.
	OnRootExit func(messages.ChildExited)
	// AllowInjectPanic lets messages.InjectPanic make the receiving actor
	// panic (the chaos suite's fault, CHS-2). Off, the message is dropped
	// with a warning: only the chaos build sets it (daemon Hooks).
	AllowInjectPanic bool
	// Ladder paces the actor restarts of every supervisor whose Options
	// name no ladder of their own: the daemon's supervision.ladder.
	// ladder.Default when zero.
	Ladder ladder.Config
	// OnRestart, when set, is told of every restart decision and
	// escalation of every supervisor in the tree (SUP-18): the daemon
	// makes each an event.
	OnRestart func(Decision)

	gen atomic.Uint64
}

// ladderOr is cfg, else the System's ladder, else the spec's default.
func (s *System) ladderOr(cfg ladder.Config) ladder.Config {
	if cfg.Cap == 0 {
		cfg = s.Ladder
	}
	if cfg.Cap == 0 {
		cfg = ladder.Default()
	}
	return cfg
}

// NewSystem returns a System on engine.
func NewSystem(engine *actor.Engine, clk clock.Clock, log zerolog.Logger) *System {
	return &System{Engine: engine, Clock: clk, Log: log, Tree: NewTree()}
}

// SpawnRoot starts the root actor of the tree at path spec.Name.
func (s *System) SpawnRoot(spec ChildSpec) *actor.PID {
	pid, _ := s.spawn(spec.Name, spec.Name, spec.Produce, nil, 0)
	return pid
}

func (s *System) spawn(path, name string, produce Producer, parent *actor.PID, restarts int) (*actor.PID, uint64) {
	gen := s.gen.Add(1)
	c := &cell{sys: s, path: path, name: name, gen: gen, parent: parent, produce: produce, restarts: restarts}
	pid := s.Engine.Spawn(func() actor.Receiver { return c }, path,
		actor.WithID("g"+strconv.FormatUint(gen, 10)),
		actor.WithInboxSize(InboxSize))
	return pid, gen
}
