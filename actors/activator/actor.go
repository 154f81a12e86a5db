package activator

import (
	"context"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/host"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Name is the activator's name under the root (root.ActivatorName).
const Name = "activator"

// Defaults of Env.
const (
	DefaultSweep = 10 * time.Second // ACT-8, ACT-10
	// DefaultShutdown is the activator's shutdown budget: within the
	// daemon's 60s drain, with 10s left for the rest of the tree.
	DefaultShutdown = 50 * time.Second
)

// Journal is the journal as the activator and its hosts use it.
type Journal interface {
	SetDue(host string, at time.Time) error
	DueTimes() ([]messages.DueTime, error)
	OweRelease(r messages.OwedRelease) error
	SettleRelease(host, epoch string) (settled bool, err error)
	OwedReleases() ([]messages.OwedRelease, error)
}

// Metrics are optional hooks for the node's metrics (DMN-19).
type Metrics interface {
	WakeStep(step string, d time.Duration)
	LeaseOp(op, outcome string)
}

// Env is what the activator needs of the node.
type Env struct {
	// Drivers returns an instance driver by its config name.
	Drivers func(name string) (drivers.Driver, bool)
	// Store and Prefix are where leases and checkpoints live (ACT-5, ACT-9).
	Store  objstore.Store
	Prefix string
	// NodeName names this node in leases and manifests (a key segment);
	// NodeID is its stable id (DMN-5).
	NodeName, NodeID string
	// Holder is the lease holder id; default NodeName/NodeID. The data
	// directory lock (DMN-2) proves the previous run on this node is gone,
	// and every host stops what that run left before it wakes, so a stable
	// holder lets a restarted daemon resume its own leases at once.
	Holder   string
	LeaseTTL time.Duration
	Journal  Journal
	Events   supervise.Emitter
	Metrics  Metrics
	// Routes is where hosts publish their edge routes (the node passes the
	// edge's table); nil publishes nothing.
	Routes host.Routes
	// Status, when set, gets every host's published snapshot.
	Status func(messages.HostStatus)
	// Committed, when set, is read at every wake for the committed
	// definition (ACT-4).
	Committed func(stack, service string) (messages.HostDefinition, bool)
	// HostsDir is DATA/hosts.
	HostsDir string
	// Bin is the engenho binary.
	Bin string
	// Sweep is the due-time and owed-release sweep interval (10s).
	Sweep time.Duration
	// Shutdown is the activator's shutdown budget (50s); hosts must be
	// asleep a few seconds before it ends.
	Shutdown time.Duration
	// StepTimeout bounds each host operation (2m).
	StepTimeout time.Duration
	// Checkpoint tunes checkpoints (format, keep); Store, Prefix and Clock
	// are filled in.
	Checkpoint checkpoint.Config
	// Tune adjusts each host's core config (tests).
	Tune func(*host.Config)
}

// Spec is the activator's child spec under the root (SUP-1).
func Spec(env Env) supervise.ChildSpec {
	if env.Sweep <= 0 {
		env.Sweep = DefaultSweep
	}
	if env.Shutdown <= 0 {
		env.Shutdown = DefaultShutdown
	}
	if env.Holder == "" && env.NodeName != "" {
		env.Holder = env.NodeName + "/" + env.NodeID
		if env.NodeID == "" {
			env.Holder = "" // the lease package makes a random one
		}
	}
	m := &memo{defs: map[string]messages.HostDefinition{}}
	cfg := Config{Sweep: env.Sweep, Shutdown: env.Shutdown}
	return supervise.ChildSpec{
		Name: Name, Restart: supervise.Permanent, Shutdown: env.Shutdown,
		Produce: func(h *supervise.Handle) actor.Receiver {
			return &Actor{h: h, env: env, cfg: cfg, memo: m}
		},
	}
}

// memo keeps the latest definition of every host across restarts of the
// activator (the stacks send definitions only when they change). Only the
// current incarnation writes it.
type memo struct {
	mu   sync.Mutex
	defs map[string]messages.HostDefinition
}

func (m *memo) get(key string) messages.HostDefinition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.defs[key]
}

func (m *memo) set(key string, d messages.HostDefinition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.defs[key] = d
}

func (m *memo) remove(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.defs, key)
}

func (m *memo) all() map[string]messages.HostDefinition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]messages.HostDefinition, len(m.defs))
	for k, v := range m.defs {
		out[k] = v
	}
	return out
}

// Actor is the activator: the shell around the core (core.go). It feeds
// the core its messages and performs the effects with supervise.Apply.
type Actor struct {
	h      *supervise.Handle
	env    Env
	cfg    Config
	memo   *memo
	kids   *supervise.Children
	timers *supervise.Timers
	cps    *checkpoint.Checkpointer
	s      State
	ctx    context.Context
	cancel context.CancelFunc
	// waiting are the host names standing in the edge table for host
	// actors that wait out their backoff (SUP-21), by key.
	waiting map[string]string
}

func (a *Actor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.start()
	case actor.Stopped:
		a.stop()
	case messages.Timer:
		if a.timers.Fresh(m) {
			a.step(m)
		}
	case messages.HostDefinition, messages.HostRemove, messages.HostReport, messages.ActivatorOwedDone,
		messages.ChildExited, messages.Shutdown:
		a.step(m)
	}
}

// step feeds one event to the core and performs its effects.
func (a *Actor) step(e Event) {
	a.s.Children = a.kids.Names()
	next, fx := Step(a.cfg, a.s, e, a.h.Clock().Now())
	a.s = next
	supervise.Apply(a.h, supervise.Shell{Timers: a.timers, Events: a.env.Events, Own: a.perform}, fx)
}

func (a *Actor) start() {
	a.h.TrapShutdown()
	a.kids = a.h.Supervise(supervise.Options{OnRestart: a.restarting})
	a.waiting = map[string]string{}
	a.timers = supervise.NewTimers(a.h)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	if a.env.Store != nil {
		cfg := a.env.Checkpoint
		cfg.Store, cfg.Prefix, cfg.Clock = a.env.Store, a.env.Prefix, a.h.Clock()
		cps, err := checkpoint.New(cfg)
		if err != nil {
			a.h.Log().Error().Err(err).Msg("checkpoints unavailable; hibernating hosts cannot wake")
		}
		a.cps = cps
	}
	dues, owed := a.load()
	a.step(Started{Defs: a.memo.all(), Dues: dues, Owed: owed})
}

// load reads the due times and owed releases the journal keeps (a local,
// bounded read at start).
func (a *Actor) load() ([]messages.DueTime, []messages.OwedRelease) {
	if a.env.Journal == nil {
		return nil, nil
	}
	dues, err := a.env.Journal.DueTimes()
	if err != nil {
		a.h.Log().Error().Err(err).Msg("reading due times")
	}
	owed, err := a.env.Journal.OwedReleases()
	if err != nil {
		a.h.Log().Error().Err(err).Msg("reading owed releases")
	}
	return dues, owed
}

func (a *Actor) stop() {
	for key := range a.waiting {
		a.unwait(key)
	}
	if a.cancel != nil {
		a.cancel()
	}
	if a.timers != nil {
		a.timers.Stop()
	}
}

// perform carries out the core's own effects.
func (a *Actor) perform(f step.Effect) {
	switch f := f.(type) {
	case Remember:
		a.memo.set(f.Key, f.Def)
		a.kids.SetLadder(f.Key, ladder.ForActors(f.Def.Definition.Engenho))
	case Forget:
		a.memo.remove(f.Key)
	case Spawn:
		a.spawn(f)
	case Tell:
		if pid := a.kids.PID(f.Key); pid != nil {
			a.h.Engine().Send(pid, f.Msg)
		}
	case Retire:
		if pid := a.kids.PID(f.Key); pid != nil {
			a.h.Engine().Send(pid, messages.HostRetire{})
		} else {
			a.unwait(f.Key)
			a.kids.Stop(f.Key, nil)
		}
	case Kill:
		a.h.Log().Error().Str("host", f.Host).Str("state", string(f.State)).Msg("host did not sleep within the drain budget; killed")
		if pid := a.kids.PID(f.Key); pid != nil {
			a.h.Engine().Stop(pid)
		}
	case ReleaseOwed:
		a.releaseOrphan(f.Owed)
	case SetState:
		a.h.SetState(f.State, "")
	case Conflict:
		a.h.Log().Error().Str("host", f.Host).Str("stack", f.Stack).Str("service", f.Service).
			Str("owner", f.Owner).Msg("host already served by another service; definition ignored")
	}
}

func (a *Actor) hostEnv() host.Env {
	e := a.env
	return host.Env{
		Drivers: e.Drivers, Store: e.Store, Prefix: e.Prefix, Checkpoints: a.cps, Node: e.NodeName, Holder: e.Holder,
		LeaseTTL: e.LeaseTTL, Journal: e.Journal, Events: e.Events, Metrics: e.Metrics, Routes: e.Routes,
		Status: e.Status, Committed: e.Committed, HostsDir: e.HostsDir, Bin: e.Bin, StepTimeout: e.StepTimeout, Tune: e.Tune,
	}
}

// spawn starts a host actor that reads its definition from the memo; a
// start the supervisor refuses goes back to the core.
func (a *Actor) spawn(f Spawn) {
	memo, key := a.memo, f.Key
	p := host.Params{Key: key, Definition: func() messages.HostDefinition { return memo.get(key) }, Owed: f.Owed}
	spec := supervise.ChildSpec{Name: key, Restart: supervise.Transient, Shutdown: host.ShutdownBudget, Produce: host.Produce(a.hostEnv(), p),
		Ladder: ladder.ForActors(memo.get(key).Definition.Engenho)}
	if err := a.kids.Start(spec); err != nil {
		a.h.Log().Error().Err(err).Str("host", key).Msg("starting host actor")
		a.step(SpawnFailed{Key: key})
	}
}

// restarting keeps a host whose actor waits out its backoff in status and
// at the edge: a route with no actor, saying why and when it comes back
// (SUP-21). The next incarnation's own route replaces it.
func (a *Actor) restarting(d supervise.Decision) {
	now := a.h.Clock().Now()
	if d.Escalated || a.env.Routes == nil || !d.At.After(now) {
		return
	}
	why := string(d.Reason)
	if d.Err != "" {
		why += ": " + d.Err
	}
	for _, key := range d.Group {
		def := a.memo.get(key)
		if h := def.Definition.Hibernate; h != nil && h.Host != "" && a.kids.PID(key) == nil {
			a.waiting[key] = h.Host
			a.env.Routes.SetHost(host.WaitingRoute(def, why, d.Failures, d.At, now))
		}
	}
}

// unwait takes down the stand-in route of key, if it still stands (a
// restarted host actor's own route is never taken down).
func (a *Actor) unwait(key string) {
	name, ok := a.waiting[key]
	if !ok {
		return
	}
	delete(a.waiting, key)
	if a.kids.PID(key) == nil {
		a.env.Routes.RemoveHost(name, nil)
	}
}

// releaseOrphan retries, in a goroutine, an owed release of a host that has
// no actor (its service is gone, or not deployed yet in this run).
func (a *Actor) releaseOrphan(o messages.OwedRelease) {
	store, prefix, j, clk, self, eng := a.env.Store, a.env.Prefix, a.env.Journal, a.h.Clock(), a.h.PID(), a.h.Engine()
	ctx, cancel := clock.WithTimeout(clk, a.ctx, 30*time.Second)
	go func() {
		defer cancel()
		if store == nil {
			eng.Send(self, messages.ActivatorOwedDone{Host: o.Host})
			return
		}
		settled, err := host.ReleaseOwed(ctx, store, prefix, o, clk.Now())
		if settled && j != nil {
			_, err = j.SettleRelease(o.Host, o.Epoch)
			settled = err == nil
		}
		msg := messages.ActivatorOwedDone{Host: o.Host, Settled: settled}
		if err != nil {
			msg.Err = err.Error()
		}
		eng.Send(self, msg)
	}()
}
