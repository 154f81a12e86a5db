package activator

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/host"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/messages"
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

// Emitter takes events for the node's event log.
type Emitter interface {
	Emit(messages.Event)
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
	Events   Emitter
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
	return supervise.ChildSpec{
		Name: Name, Restart: supervise.Permanent, Shutdown: env.Shutdown,
		Produce: func(h *supervise.Handle) actor.Receiver {
			return &Actor{h: h, env: env, memo: m, hosts: map[string]*entry{}, dues: map[string]time.Time{},
				orphans: map[string]messages.OwedRelease{}, seen: map[string]bool{}}
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

// entry is what the activator knows of one host actor.
type entry struct {
	key     string
	stack   string
	service string
	host    string
	state   messages.HostState
	drained bool
	retired bool
}

// Actor is the activator.
type Actor struct {
	h    *supervise.Handle
	env  Env
	memo *memo
	kids *supervise.Children
	cps  *checkpoint.Checkpointer

	hosts    map[string]*entry
	dues     map[string]time.Time // host -> next due time (ACT-10)
	orphans  map[string]messages.OwedRelease
	inFlight map[string]bool
	seen     map[string]bool

	draining bool
	sweep    clock.Timer
	drainT   clock.Timer
	ctx      context.Context
	cancel   context.CancelFunc
}

func (a *Actor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.start()
	case actor.Stopped:
		a.stop()
	case messages.HostDefinition:
		a.define(m)
	case messages.HostRemove:
		a.remove(m)
	case messages.HostReport:
		a.report(m)
	case messages.ActivatorSweep:
		a.sweepNow()
	case messages.ActivatorOwedDone:
		a.owedDone(m)
	case messages.ChildExited:
		a.childExited(m)
	case messages.Shutdown:
		a.drain()
	case messages.ActivatorDrainTimeout:
		a.drainTimedOut()
	}
}

func (a *Actor) start() {
	a.h.TrapShutdown()
	a.kids = a.h.Supervise(supervise.Options{})
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.inFlight = map[string]bool{}
	if a.env.Store != nil {
		cfg := a.env.Checkpoint
		cfg.Store, cfg.Prefix, cfg.Clock = a.env.Store, a.env.Prefix, a.h.Clock()
		cps, err := checkpoint.New(cfg)
		if err != nil {
			a.h.Log().Error().Err(err).Msg("checkpoints unavailable; hibernating hosts cannot wake")
		}
		a.cps = cps
	}
	a.load()
	defs := a.memo.all()
	keys := make([]string, 0, len(defs))
	for k := range defs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a.define(defs[k])
	}
	a.armSweep()
	a.h.SetState("running", "")
}

// load reads the due times and owed releases the journal keeps (a local,
// bounded read at start).
func (a *Actor) load() {
	if a.env.Journal == nil {
		return
	}
	if dues, err := a.env.Journal.DueTimes(); err == nil {
		for _, d := range dues {
			a.dues[d.Host] = d.At
		}
	} else {
		a.h.Log().Error().Err(err).Msg("reading due times")
	}
	if owed, err := a.env.Journal.OwedReleases(); err == nil {
		for _, o := range owed {
			a.orphans[o.Host] = o
		}
	} else {
		a.h.Log().Error().Err(err).Msg("reading owed releases")
	}
}

func (a *Actor) stop() {
	if a.cancel != nil {
		a.cancel()
	}
	if a.sweep != nil {
		a.sweep.Stop()
	}
	if a.drainT != nil {
		a.drainT.Stop()
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

// define creates or updates a host actor from a definition.
func (a *Actor) define(d messages.HostDefinition) {
	key := host.Key(d)
	for k, e := range a.hosts {
		if e.stack == d.Stack && e.service == d.Service && k != key && !e.retired {
			// The service changed host (or stopped hibernating): the old
			// host sleeps and goes; the new one starts.
			a.retire(e)
		}
	}
	if e, ok := a.hosts[key]; ok && (e.stack != d.Stack || e.service != d.Service) {
		a.h.Log().Error().Str("host", e.host).Str("stack", d.Stack).Str("service", d.Service).
			Str("owner", e.stack+"/"+e.service).Msg("host already served by another service; definition ignored")
		return
	}
	a.memo.set(key, d)
	if e, ok := a.hosts[key]; ok && !e.retired {
		if pid := a.kids.PID(key); pid != nil {
			a.h.Engine().Send(pid, d)
		}
		return
	}
	if a.kids.Has(key) {
		return // a retiring incarnation is still ending; started again after it
	}
	hostName := ""
	if d.Definition.Hibernate != nil {
		hostName = d.Definition.Hibernate.Host
	}
	var owed *messages.OwedRelease
	if o, ok := a.orphans[hostName]; ok && hostName != "" {
		owed = &o
		delete(a.orphans, hostName)
	}
	memo := a.memo
	p := host.Params{Key: key, Definition: func() messages.HostDefinition { return memo.get(key) }, Owed: owed}
	spec := supervise.ChildSpec{Name: key, Restart: supervise.Transient, Shutdown: host.ShutdownBudget, Produce: host.Produce(a.hostEnv(), p)}
	if err := a.kids.Start(spec); err != nil {
		a.h.Log().Error().Err(err).Str("host", key).Msg("starting host actor")
		return
	}
	a.hosts[key] = &entry{key: key, stack: d.Stack, service: d.Service, host: hostName, state: messages.HostAsleep}
	// A hibernating worker with no due time runs at its first sight in
	// this run (ACT-12).
	if hostName != "" && d.Definition.Standalone() && !a.seen[key] {
		if _, due := a.dues[hostName]; !due && !d.Stopped {
			a.h.Engine().Send(a.kids.PID(key), messages.HostWake{Host: hostName, Reason: messages.WakeDeploy})
		}
	}
	a.seen[key] = true
}

func (a *Actor) remove(m messages.HostRemove) {
	for _, e := range a.hosts {
		if e.stack == m.Stack && e.service == m.Service && !e.retired {
			a.retire(e)
		}
	}
}

func (a *Actor) retire(e *entry) {
	e.retired = true
	a.memo.remove(e.key)
	delete(a.dues, e.host)
	if pid := a.kids.PID(e.key); pid != nil {
		a.h.Engine().Send(pid, messages.HostRetire{})
	} else {
		a.kids.Stop(e.key, nil)
	}
}

func (a *Actor) report(m messages.HostReport) {
	e, ok := a.hosts[m.Key]
	if !ok {
		return
	}
	e.state, e.drained = m.State, m.Drained
	if e.host != "" && !e.retired {
		if m.Due.IsZero() {
			delete(a.dues, e.host)
		} else {
			a.dues[e.host] = m.Due
		}
	}
	if a.draining {
		if !m.Drained {
			// A host that restarted since the drain began hears it again.
			if pid := a.kids.PID(m.Key); pid != nil && m.State == messages.HostAsleep {
				a.h.Engine().Send(pid, messages.HostDrain{})
			}
		}
		a.maybeDrained()
	}
}

func (a *Actor) childExited(m messages.ChildExited) {
	e, ok := a.hosts[m.Name]
	if !ok {
		return
	}
	if a.kids.Has(m.Name) {
		e.drained = false // being restarted
		return
	}
	delete(a.hosts, m.Name)
	if def := a.memo.get(m.Name); def.Stack != "" && !a.draining {
		a.define(def) // redefined while it was retiring
	}
	if a.draining {
		a.maybeDrained()
	}
}

func (a *Actor) armSweep() {
	if a.draining {
		return
	}
	self, eng := a.h.PID(), a.h.Engine()
	a.sweep = a.h.Clock().AfterFunc(a.env.Sweep, func() { eng.Send(self, messages.ActivatorSweep{}) })
}

// sweepNow wakes every sleeping host whose due time came (ACT-10), nudges
// each host to retry what waits (a pending stop, an owed release, ACT-8),
// and retries the owed releases of hosts without an actor.
func (a *Actor) sweepNow() {
	if a.draining {
		return
	}
	now := a.h.Clock().Now()
	for key, e := range a.hosts {
		pid := a.kids.PID(key)
		if pid == nil || e.retired {
			continue
		}
		a.h.Engine().Send(pid, messages.HostSweep{})
		if at, ok := a.dues[e.host]; ok && e.host != "" && !at.After(now) && e.state == messages.HostAsleep {
			a.h.Engine().Send(pid, messages.HostWake{Host: e.host, Reason: messages.WakeDue})
		}
	}
	for h, o := range a.orphans {
		if a.inFlight[h] {
			continue
		}
		a.inFlight[h] = true
		a.releaseOrphan(o)
	}
	a.armSweep()
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

func (a *Actor) owedDone(m messages.ActivatorOwedDone) {
	delete(a.inFlight, m.Host)
	if !m.Settled {
		return
	}
	delete(a.orphans, m.Host)
	if a.env.Events != nil {
		a.env.Events.Emit(messages.Event{UnixMs: a.h.Clock().Now().UnixMilli(), Level: messages.LevelInfo,
			Kind: messages.KindLeaseReleaseSettled, Host: m.Host, Actor: a.h.Path(), Message: "owed lease release settled"})
	}
}

// drain: shutdown began (ACT-13). Nothing wakes from now on; every host
// goes to sleep (final checkpoint, lease release) before the activator
// ends, within its budget.
func (a *Actor) drain() {
	if a.draining {
		return
	}
	a.draining = true
	a.h.SetState("draining", "")
	if a.sweep != nil {
		a.sweep.Stop()
	}
	for _, key := range a.kids.Names() {
		if pid := a.kids.PID(key); pid != nil {
			a.h.Engine().Send(pid, messages.HostDrain{})
		}
	}
	self, eng := a.h.PID(), a.h.Engine()
	wait := a.env.Shutdown - 3*time.Second
	if wait <= 0 {
		wait = a.env.Shutdown / 2
	}
	a.drainT = a.h.Clock().AfterFunc(wait, func() { eng.Send(self, messages.ActivatorDrainTimeout{}) })
	a.maybeDrained()
}

func (a *Actor) maybeDrained() {
	for _, key := range a.kids.Names() {
		if e, ok := a.hosts[key]; !ok || !e.drained {
			return // still sleeping, retiring or restarting
		}
	}
	a.exit()
}

func (a *Actor) exit() {
	if a.drainT != nil {
		a.drainT.Stop()
	}
	a.h.Exit(messages.ExitShutdown, nil)
}

// drainTimedOut: some host did not get to sleep in time; it is killed
// (its lease expires) so the daemon can exit within its budget.
func (a *Actor) drainTimedOut() {
	for _, key := range a.kids.Names() {
		if e, ok := a.hosts[key]; ok && !e.drained {
			a.h.Log().Error().Str("host", e.host).Str("state", string(e.state)).Msg("host did not sleep within the drain budget; killed")
			if pid := a.kids.PID(key); pid != nil {
				a.h.Engine().Stop(pid)
			}
		}
	}
	a.exit()
}
