package service

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/engenho/engenho/actors/replica"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/ports"
	"github.com/engenho/engenho/drivers/probe"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Store is the journal as a service uses it: rollout progress and failed
// revisions (SVC-14). Writes are synced before they return.
type Store interface {
	FailedRevisions(stack, service string) (map[string]bool, error)
	MarkFailed(stack, service, deployment, revision string) error
	SaveProgress(stack, service, deployment, revision string, done []int) error
}

// Ports is the node's TCP balancer as a service uses it (SVC-22): one named
// listener per published port, spreading connections over the backends it
// is given, draining a retired one (SVC-16). It belongs to the node
// (runtime/daemon adapts runtime/balancer to it), so a restarted service
// actor finds its listeners still there. It is safe for concurrent use.
type Ports interface {
	// Listen opens the listener name on addr.
	Listen(name, addr string) error
	// Addr is where name listens, if it does.
	Addr(name string) (net.Addr, bool)
	// SetBackends replaces name's rotation.
	SetBackends(name string, backends []Backend) error
	// Drain takes backend id out of name's rotation; the channel closes when
	// its connections have ended or timeout has passed.
	Drain(name, id string, timeout time.Duration) <-chan struct{}
	// Close closes name's listener and its connections.
	Close(name string) error
	// Names lists the listeners whose names start with prefix.
	Names(prefix string) []string
	// Holder names the listener holding an address that overlaps addr.
	Holder(addr string) (string, bool)
}

// Backend is one in-rotation replica behind a published port.
type Backend struct {
	ID   string
	Addr string
}

// Env is what a service actor uses of the node.
type Env struct {
	Driver func(name string) (drivers.Driver, bool)
	Ports  Ports
	// HostPorts hands out the host ports of new instances (SVC-24);
	// runtime/daemon passes the node's drivers/ports.Allocator. Nil: the
	// kernel's pick (ports.Kernel), for tests that build an Env by hand.
	HostPorts HostPorts
	Events    supervise.Emitter
	Board     *supervise.Board
	Store     Store
	// Retirements keeps pending retirements across daemon restarts
	// (SVC-33); nil keeps them in the actor only.
	Retirements RetirementStore
	// Bin is the engenho binary, for ${ENGENHO_BIN} in commands.
	Bin         string
	StepTimeout time.Duration
	Sweep       time.Duration
	OutputLines int
}

// HostPorts is the node's host-port allocator as a service uses it
// (SVC-24): Take a port for a new instance, Adopt the ports of instances
// found running, Release the ports of an instance that is gone.
type HostPorts interface {
	Take() (int, error)
	Adopt(ports ...int)
	Release(ports ...int)
}

// Actor is the service actor: the shell of the core (Step). It turns its
// messages into events and performs the effects the core returns.
type Actor struct {
	h      *supervise.Handle
	env    Env
	kids   *supervise.Children
	timers *supervise.Timers
	shell  supervise.Shell
	stack  string
	name   string

	// defs by effective revision; each is shared, read only, by its
	// replicas (PERF-3).
	defs    map[string]*revision
	current messages.ServiceRevision
	drv     drivers.Driver
	prober  *probe.Prober

	s     State
	views map[string]messages.ReplicaStatus // last report of each replica

	planQueued bool
	sweeping   bool // a sweep's listing is under way (sweep.go)
	ports      []portBinding
	held       map[string][]int           // replica ID -> host ports it holds (SVC-24)
	portsShort bool                       // the last Take failed; said once until one succeeds
	rotation   map[string]string          // port name -> last backends, to skip no-op updates
	applied    map[string]map[string]bool // port name -> replica IDs the balancer last took (SVC-30)
	lastSum    messages.ServiceSummary
	retired    map[string]time.Time // instance name -> when its replica deleted it
	ctx        context.Context
	cancel     context.CancelFunc
}

// relistTimer is the shell's own timer: list the instances again after a
// failed listing.
const relistTimer = "relist"

// retiredMemory is how long an instance a replica retired (deleted) is
// never taken for an orphan: a listing begun before its delete may still
// name it.
const retiredMemory = time.Minute

// portsTimer is the shell's other timer: plan again after a new instance
// found no free host port (SVC-24), every portsRetry.
const (
	portsTimer = "host-ports"
	portsRetry = 5 * time.Second
)

// listenTimer tries again, every portsRetry, the published ports that could
// not listen (SVC-22).
const listenTimer = "listen"

type portBinding struct {
	name      string
	listen    string
	published int
	target    int
	// listenErr is the last failure to listen, "" while it listens: a
	// port that cannot be had is tried again at every pass. heldBy names
	// the other service of this stack that holds its address, when one
	// does: a hand-over under way (the other has not had its new
	// definition yet), not a failure.
	listenErr string
	heldBy    string
}

// Produce returns the producer of a service actor; def is its first
// definition, stopped its durable intent.
func Produce(env Env, def messages.ServiceDefinition, stopped bool) supervise.Producer {
	return func(h *supervise.Handle) actor.Receiver {
		a := &Actor{h: h, env: env, stack: def.Stack, name: def.Current.Definition.Name, timers: supervise.NewTimers(h),
			defs: map[string]*revision{}, views: map[string]messages.ReplicaStatus{}, rotation: map[string]string{},
			held: map[string][]int{}, applied: map[string]map[string]bool{}}
		if a.env.HostPorts == nil {
			a.env.HostPorts = ports.Kernel{}
		}
		a.shell = supervise.Shell{Timers: a.timers, Events: env.Events,
			Event: messages.Event{Stack: a.stack, Service: a.name}, Own: a.perform}
		a.s = State{Replicas: map[string]Replica{}, Failed: map[string]bool{}, Stopped: stopped}
		// The first definition asks only for a plan, and the actor plans
		// once it has adopted its instances: nothing to perform yet.
		first := a.define(def)
		a.s, _ = Step(a.config(), a.s, first, h.Clock().Now())
		return a
	}
}

func (a *Actor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.start()
	case actor.Stopped:
		a.stopped()
	case messages.ServiceListed:
		if m.Sweep {
			a.swept(m)
		} else {
			a.adopt(m)
		}
	case messages.Timer:
		a.timer(m)
	case messages.ReplicaStatus:
		a.replicaReport(m)
	case messages.ChildExited:
		a.childExited(m)
	case messages.ServicePlan:
		a.planQueued = false
		a.feed(Tick{})
	case messages.ServiceDefinition:
		ev := a.define(m)
		if a.drv != nil {
			a.openPorts()
		}
		a.feed(ev)
	case messages.ServiceIntent:
		a.feed(SetStopped{Stopped: m.Stopped})
	case messages.ServiceRetry:
		a.feed(Retry{})
	case messages.ServiceRemove:
		a.feed(Remove{})
	case messages.DependencyStatus:
		a.feed(Dependency{Status: m})
	case messages.ServiceDrained:
		if pid := a.kids.PID(childName(a.s.Replicas[m.ID])); pid != nil {
			c.Send(pid, messages.ReplicaCommand{Intent: messages.IntentRetire})
		}
	}
}

// feed gives the core event e and performs the effects it returns. The
// core folds it into the actor's state in place (fold): the actor keeps
// no earlier state.
func (a *Actor) feed(e Event) {
	var fx []step.Effect
	a.s, fx = fold(a.config(), a.s, e, a.h.Clock().Now())
	supervise.Apply(a.h, a.shell, fx)
}

// config is the core's config from the latest definition.
func (a *Actor) config() Config { return coreConfig(a.current.Definition) }

// define keeps a definition from the stack and returns the event for the
// core.
func (a *Actor) define(def messages.ServiceDefinition) Define {
	a.current = def.Current
	if a.kids != nil {
		a.kids.SetDefaultLadder(ladder.ForActors(def.Current.Definition.Engenho))
	}
	a.defs[def.Current.Revision] = a.newRevision(def.Current.Definition)
	var prev *Target
	if def.Previous != nil {
		a.defs[def.Previous.Revision] = a.newRevision(def.Previous.Definition)
		t := targetOf(*def.Previous)
		prev = &t
	}
	return Define{Target: targetOf(def.Current), Previous: prev}
}

func (a *Actor) start() {
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.kids = a.h.Supervise(supervise.Options{Ladder: ladder.ForActors(a.current.Definition.Engenho)})
	drv, ok := a.env.Driver(a.current.Definition.Driver)
	if !ok {
		a.h.Exit(messages.ExitError, fmt.Errorf("service %s/%s: driver %q is not available", a.stack, a.name, a.current.Definition.Driver))
		return
	}
	a.drv, a.prober = drv, probe.NewProber(drv, a.h.Clock())
	// The revisions defined before the driver was known (the producer's
	// first definition) are made again with it, so their shared Config
	// says DriverRestarts and no replica copies it (PERF-1, PERF-3). No
	// replica reads them yet; made anew all the same, as a stored
	// revision is never changed.
	for rev, rd := range a.defs {
		a.defs[rev] = a.newRevision(rd.def)
	}
	if failed, err := a.env.Store.FailedRevisions(a.stack, a.name); err == nil {
		a.feed(Recall{Failed: failed})
	} else {
		a.h.Log().Warn().Err(err).Msg("reading failed revisions")
	}
	a.recallRetirements()
	a.openPorts()
	a.list()
	a.publish()
}

func (a *Actor) stopped() {
	if a.cancel != nil {
		a.cancel()
	}
	a.timers.Stop()
}

// timer runs a timer that fired as armed now: the shell's relist, or the
// core's.
func (a *Actor) timer(m messages.Timer) {
	if !a.timers.Fresh(m) {
		return
	}
	if m.Name == relistTimer {
		a.list()
		return
	}
	if m.Name == sweepTimer {
		a.sweep()
		return
	}
	if m.Name == portsTimer {
		a.planSoon()
		return
	}
	if m.Name == listenTimer {
		if !a.s.Removed { // removed: its ports are closed for good
			a.updateRotation() // listens first
			a.publish()
		}
		return
	}
	a.feed(Fired{Timer: m.Name})
}

// list asks the driver for the instances of this service (SUP-9).
func (a *Actor) list() { a.listing(false) }

// listing lists the instances for the adoption, or for a sweep.
func (a *Actor) listing(sweep bool) {
	drv, self, eng := a.drv, a.h.PID(), a.h.Engine()
	sel := drivers.Labels{drivers.LabelStack: a.stack, drivers.LabelService: a.name}
	clk, bound := a.h.Clock(), stepTimeout(a.current.Definition, a.env)
	ctx, cancel := clock.WithTimeout(clk, a.ctx, bound)
	go func() {
		defer cancel()
		res, answered := supervise.Bounded(ctx, clk, func(ctx context.Context) messages.ServiceListed {
			found, err := drv.List(ctx, sel)
			return messages.ServiceListed{Instances: found, Err: err, Sweep: sweep}
		})
		if !answered {
			res.Sweep = sweep
			res.Err = drivers.Errorf(drv.Name(), "list", "", drivers.ErrTransient,
				"no answer within the step bound (%s); the call was abandoned", bound)
		}
		eng.Send(self, res)
	}()
}

// adopt spawns a replica actor for every instance the driver listed; no
// healthy one is restarted (SUP-9, DMN-9).
func (a *Actor) adopt(m messages.ServiceListed) {
	if m.Err != nil {
		a.h.Log().Warn().Err(m.Err).Msg("listing instances failed; retrying in 1s")
		a.timers.Arm(relistTimer, a.h.Clock().Now().Add(time.Second))
		return
	}
	if a.s.Adopted {
		return
	}
	for _, st := range m.Instances {
		if st.Labels[stackfile.LabelSidecar] != "" {
			continue
		}
		a.adoptOne(st)
	}
	a.feed(Adopted{})
	a.armSweep()
}

// noteRetired remembers an instance its replica deleted (retiredMemory).
func (a *Actor) noteRetired(name string) {
	if a.retired == nil {
		a.retired = map[string]time.Time{}
	}
	a.retired[name] = a.h.Clock().Now()
}

// adoptOrphans adopts every listed instance of this service that no
// replica actor manages: one a replica took for missing on a false "not
// found" and replaced, or one a crash left behind (SVC-8, SVC-15). A
// slot that then has two instances of the current revision keeps one.
// Instance names are chosen here before they are created, so an instance
// being created is never taken for an orphan.
func (a *Actor) adoptOrphans(found []drivers.Status) {
	managed := make(map[string]bool, len(a.s.Replicas))
	for id, r := range a.s.Replicas {
		managed[stackfile.InstanceName(a.stack, a.name, r.Slot, id)] = true
	}
	now := a.h.Clock().Now()
	for name, at := range a.retired {
		if now.Sub(at) > retiredMemory {
			delete(a.retired, name)
		}
	}
	for _, st := range found {
		if st.Labels[stackfile.LabelSidecar] != "" || managed[st.Name] || a.retired[st.Name] != (time.Time{}) {
			continue
		}
		a.h.Log().Warn().Str("instance", st.Name).Str("state", string(st.State)).Msg("found an instance of this service no replica manages; adopting it")
		a.adoptOne(st)
	}
}

func (a *Actor) adoptOne(st drivers.Status) {
	slot, err := strconv.Atoi(st.Labels[drivers.LabelSlot])
	prefix := stackfile.InstanceName(a.stack, a.name, slot, "")
	id := strings.TrimPrefix(st.Name, prefix)
	if err != nil || slot < 1 || !stackfile.ValidInstanceID(id) {
		a.h.Log().Warn().Str("instance", st.Name).Msg("instance with our labels but not our name; left alone")
		return
	}
	rev, dep := st.Labels[drivers.LabelRevision], st.Labels[drivers.LabelDeployment]
	def, ok := a.defs[rev]
	if !ok {
		def = a.newRevision(a.current.Definition) // an old revision: replaced by the rollout
	}
	r := Replica{ID: id, Slot: slot, Revision: rev, Deployment: dep, Phase: "adopting", SpawnedAt: a.h.Clock().Now(), Intent: a.wantIntent()}
	if _, pending := a.s.Retirements[id]; pending {
		// Its retirement failed before: retried first (SVC-33).
		r.Retiring, r.Intent = true, messages.IntentRetire
	}
	hostPorts := addrPorts(st.Addresses)
	// An adopted instance keeps its ports: they count as in use (SVC-24).
	for _, p := range hostPorts {
		a.held[id] = append(a.held[id], p)
	}
	a.env.HostPorts.Adopt(a.held[id]...)
	a.spawnReplica(r, def, replica.Params{Adopt: &st}, hostPorts)
}

func (a *Actor) wantIntent() messages.Intent {
	if a.s.Stopped {
		return messages.IntentStop
	}
	return messages.IntentRun
}

func addrPorts(addrs map[int]string) map[int]int {
	out := map[int]int{}
	for target, addr := range addrs {
		if _, p, err := net.SplitHostPort(addr); err == nil {
			out[target], _ = strconv.Atoi(p)
		}
	}
	return out
}

// spawnReplica starts the actor of one instance. The producer runs again
// if the actor is restarted; it then inspects the instance it owns and
// carries the slot's ledger over (SUP-9).
func (a *Actor) spawnReplica(r Replica, rd *revision, p replica.Params, hostPorts map[int]int) {
	def := &rd.def
	inst := stackfile.Instance{Stack: a.stack, Slot: r.Slot, ID: r.ID, Deployment: r.Deployment, HostPorts: hostPorts, Bin: a.env.Bin}
	p.Stack, p.Service, p.Slot, p.ID = a.stack, a.name, r.Slot, r.ID
	p.Revision, p.Deployment, p.Intent = r.Revision, r.Deployment, r.Intent
	p.Instance = stackfile.InstanceName(a.stack, def.Name, r.Slot, r.ID)
	rev := r.Revision
	// Rendered when the replica creates its instance, not kept: the
	// env, labels and command of a spec were ~1 KiB a replica (PERF-3).
	p.Spec = func() drivers.Spec {
		spec := stackfile.InstanceSpec(*def, inst)
		spec.Labels[drivers.LabelRevision] = rev // the effective revision
		return spec
	}
	p.Config = &rd.cfg
	renv := replica.Env{Driver: a.drv, Prober: a.prober, Events: a.env.Events, Board: a.env.Board,
		StepTimeout: stepTimeout(*def, a.env), OutputLines: a.env.OutputLines}
	// The closure keeps what each incarnation needs and no more: one
	// Params, shared with the first incarnation (PERF-3).
	id, first := r.ID, &p
	incarnation := 0
	produce := func(h *supervise.Handle) actor.Receiver {
		incarnation++
		if incarnation == 1 {
			return replica.Produce(renv, first)(h)
		}
		q := *first
		last := a.views[id]
		q.Adopt, q.Existing, q.Ledger, q.HasLedger = nil, true, last.Ledger, last.HasLedger
		q.Intent = a.s.Replicas[id].Intent
		if a.s.Replicas[id].Retiring {
			q.Intent = messages.IntentRetire
		}
		return replica.Produce(renv, &q)(h)
	}
	a.feed(Spawned{Replica: r})
	if err := a.kids.Start(supervise.ChildSpec{Name: childName(r), Produce: produce, Restart: supervise.Transient}); err != nil {
		a.h.Log().Error().Err(err).Msg("starting replica actor")
	}
}

// stepTimeout bounds one driver call of the service (SVC-11): its own
// x-engenho.step_timeout, else the node's.
func stepTimeout(def stackfile.Service, env Env) time.Duration {
	if def.Engenho.StepTimeout > 0 {
		return def.Engenho.StepTimeout
	}
	return env.StepTimeout
}

func childName(r Replica) string { return "replica:" + strconv.Itoa(r.Slot) + "-" + r.ID }

func (a *Actor) replicaReport(m messages.ReplicaStatus) {
	if _, ok := a.s.Replicas[m.ID]; !ok {
		return
	}
	a.views[m.ID] = m
	a.feed(Report{Status: m})
}

func (a *Actor) childExited(m messages.ChildExited) {
	if a.kids.Has(m.Name) {
		return // restarted, now or later, by the supervisor
	}
	var gone string
	var final bool
	for id, r := range a.s.Replicas {
		if childName(r) == m.Name {
			gone, final = id, a.views[id].Final
			delete(a.views, id)
			if r.Retiring {
				// A retired replica deletes its instance before it ends: its
				// ports are free. Any other end may leave the instance (and
				// its ports) behind, so they stay in use until the next boot.
				a.env.HostPorts.Release(a.held[id]...)
				delete(a.held, id)
				a.noteRetired(stackfile.InstanceName(a.stack, a.name, r.Slot, id))
			}
			if m.Reason.Abnormal() {
				a.env.Board.DeleteReplica(a.stack, a.name, id)
			}
		}
	}
	a.feed(Exited{ID: gone, Final: final})
}

// planSoon plans once after the messages already queued (a burst of
// replica reports costs one pass).
func (a *Actor) planSoon() {
	if a.planQueued {
		return
	}
	a.planQueued = true
	a.h.Engine().Send(a.h.PID(), messages.ServicePlan{})
}

// perform does the core's own effects (supervise.Apply does the shared
// ones).
func (a *Actor) perform(f step.Effect) {
	switch f := f.(type) {
	case Spawn:
		a.spawnNew(f)
	case Retire:
		a.retire(f.ID)
	case SetIntent:
		if pid := a.kids.PID(childName(a.s.Replicas[f.ID])); pid != nil {
			a.h.Engine().Send(pid, messages.ReplicaCommand{Intent: f.Intent})
		}
	case SaveProgress:
		if err := a.env.Store.SaveProgress(a.stack, a.name, f.Target.Deployment, f.Target.Revision, f.Done); err != nil {
			a.h.Log().Error().Err(err).Msg("saving rollout progress")
		}
	case MarkFailed:
		if err := a.env.Store.MarkFailed(a.stack, a.name, f.Target.Deployment, f.Target.Revision); err != nil {
			a.h.Log().Error().Err(err).Msg("recording a failed revision")
		}
	case ClearBackoff:
		a.retry()
	case Replan:
		a.planSoon()
	case Publish:
		a.updateRotation()
		a.publish()
	case Shutdown:
		a.shutdown()
	case Withdraw:
		a.withdraw(f.ID)
	case RecordRetirement:
		a.recordRetirement(f.Retirement)
	case ClearRetirement:
		a.clearRetirement(f.ID)
	default:
		a.h.Log().Error().Str("effect", fmt.Sprintf("%T", f)).Msg("effect the service shell does not know")
	}
}

// revision is one revision's definition and its replicas' config, both
// shared, read only, by every replica of it (PERF-3: a copy of each in
// every replica was ~1.2 KiB of it).
type revision struct {
	def stackfile.Service
	cfg replica.Config
}

func (a *Actor) newRevision(def stackfile.Service) *revision {
	rd := &revision{def: def, cfg: replicaConfig(def, a.env)}
	if _, ok := a.drv.(drivers.RestartWatcher); ok {
		rd.cfg.Policy.DriverRestarts = true // PERF-1; the replica would copy its Config to set it
	}
	return rd
}

func (a *Actor) spawnNew(act Spawn) {
	def, ok := a.defs[act.Target.Revision]
	if !ok {
		a.h.Log().Error().Str("revision", act.Target.Revision).Msg("no definition for revision")
		return
	}
	// Every new instance, a start-first rollout's included, gets its host
	// ports from the node's range (SVC-24).
	hostPorts, taken := map[int]int{}, []int(nil)
	for _, p := range def.def.Ports {
		port, err := a.env.HostPorts.Take()
		if err != nil {
			a.env.HostPorts.Release(taken...)
			a.h.Log().Error().Err(err).Int("slot", act.Slot).Msg("allocating a host port")
			// No instance without its ports: plan again in a while (the
			// core asks for the spawn again, and a rollout's deadline
			// still runs). Said once until a Take succeeds.
			if !a.portsShort {
				supervise.Apply(a.h, a.shell, []step.Effect{step.Emit{Kind: messages.KindDeployFailed, Level: messages.LevelError,
					Message: fmt.Sprintf("slot %d: no host port for target %d: %v", act.Slot, p.Target, err)}})
			}
			a.portsShort = true
			a.timers.Arm(portsTimer, a.h.Clock().Now().Add(portsRetry))
			return
		}
		hostPorts[p.Target] = port
		taken = append(taken, port)
	}
	a.portsShort = false
	r := Replica{ID: stackfile.NewInstanceID(), Slot: act.Slot, Revision: act.Target.Revision, Deployment: act.Target.Deployment,
		Phase: "creating", SpawnedAt: a.h.Clock().Now(), Intent: a.wantIntent()}
	if len(taken) > 0 {
		a.held[r.ID] = taken
	}
	a.spawnReplica(r, def, replica.Params{}, hostPorts)
}

// retire takes a replica out of rotation, lets its connections drain,
// then tells it to stop and delete its instance (SVC-16).
func (a *Actor) retire(id string) {
	r := a.s.Replicas[id]
	a.updateRotation()
	var chans []<-chan struct{}
	drain := a.current.Definition.Engenho.Drain
	for _, p := range a.ports {
		chans = append(chans, a.env.Ports.Drain(p.name, id, drain))
	}
	self, eng := a.h.PID(), a.h.Engine()
	if len(chans) == 0 {
		if pid := a.kids.PID(childName(r)); pid != nil {
			eng.Send(pid, messages.ReplicaCommand{Intent: messages.IntentRetire})
		}
		return
	}
	go func() {
		for _, c := range chans {
			<-c
		}
		eng.Send(self, messages.ServiceDrained{ID: id})
	}()
}

func (a *Actor) retry() {
	for _, r := range a.s.Replicas {
		if pid := a.kids.PID(childName(r)); pid != nil {
			a.h.Engine().Send(pid, messages.ReplicaRetry{})
		}
	}
}

// shutdown closes the service's listeners, takes it off the board and
// tells the stack it is gone; the core ends the actor next.
func (a *Actor) shutdown() {
	for _, p := range a.ports {
		_ = a.env.Ports.Close(p.name)
	}
	a.env.Board.DeleteService(a.stack, a.name)
	a.h.Engine().Send(a.h.Parent(), messages.ServiceSummary{Service: a.name, Gone: true})
}

func (a *Actor) waitingFor() string {
	var names []string
	for _, d := range a.current.Definition.DependsOn {
		names = append(names, d.Service+" ("+d.Condition+")")
	}
	return strings.Join(names, ", ")
}

// updateRotation gives the balancer the in-rotation replicas of each port
// that may be published (Publishable, SVC-30, SVC-33). It reports whether
// the balancer took every change; a refusal makes the service
// publication-inhibited, and every pass tries again.
func (a *Actor) updateRotation() bool {
	allowed := Publishable(a.s, a.appliedIDs())
	a.listenPorts()
	var errs []error
	for _, p := range a.ports {
		if p.listenErr != "" {
			continue // PortsDown says why; listenPorts tries again
		}
		var bs []Backend
		ids := map[string]bool{}
		for _, r := range sorted(a.s.Replicas) {
			if !allowed[r.ID] {
				continue
			}
			if addr := a.views[r.ID].Addresses[a.targetOf(r.Revision, p)]; addr != "" {
				bs = append(bs, Backend{ID: r.ID, Addr: addr})
				ids[r.ID] = true
			}
		}
		key := fmt.Sprint(bs)
		if a.rotation[p.name] == key && a.s.Inhibited == "" {
			continue
		}
		if err := a.env.Ports.SetBackends(p.name, bs); err != nil {
			a.h.Log().Warn().Err(err).Str("port", p.name).Msg("updating the balancer")
			delete(a.rotation, p.name) // unknown now: applied again next time
			// Fail closed: a replica this change withdrew counts as withdrawn
			// and is not published again while the service is inhibited.
			a.applied[p.name] = intersect(a.applied[p.name], ids)
			errs = append(errs, fmt.Errorf("port %s: %w", p.name, err))
			continue
		}
		a.rotation[p.name], a.applied[p.name] = key, ids
	}
	return a.rotationDone(errs)
}

// publish puts the service's snapshot on the board and tells the stack.
func (a *Actor) publish() {
	sum := Summarize(a.s, a.waitingFor(), a.h.Clock().Now())
	st := messages.ServiceStatus{
		Stack: a.stack, Service: a.name, State: sum.State, Message: sum.Message, Reason: sum.Reason,
		Revision: a.s.Target.Revision, Deployment: a.s.Target.Deployment, Driver: a.current.Definition.Driver,
		Desired: a.s.Target.Replicas, Running: sum.Running, Healthy: sum.Healthy, Stopped: a.s.Stopped,
		Rollout: rolloutStatus(a.s), UpdatedAt: a.h.Clock().Now(),
	}
	if !sum.NextAttempt.IsZero() {
		next := sum.NextAttempt
		st.NextAttempt = &next
	}
	if sum.State != messages.ServiceConverged {
		st.FailureOutput = a.failureOutput()
	}
	for _, p := range a.ports {
		st.Ports = append(st.Ports, messages.PortStatus{Listen: p.listen, Target: p.target})
	}
	a.recoveryStatus(&st)
	a.env.Board.PutService(st)
	a.h.SetState(string(sum.State), sum.Message)
	s := messages.ServiceSummary{Service: a.name, State: sum.State, Running: sum.Running, Healthy: sum.Healthy, Desired: a.s.Target.Replicas}
	if s != a.lastSum {
		a.lastSum = s
		a.h.Engine().Send(a.h.Parent(), s)
	}
}

// failureOutput is the output of the last replica that failed to come up
// (SVC-21).
func (a *Actor) failureOutput() string {
	var best messages.ReplicaStatus
	for _, v := range a.views {
		if v.FailureOutput != "" && v.Ledger.LastFailure.After(best.Ledger.LastFailure) {
			best = v
		}
	}
	return best.FailureOutput
}

func rolloutStatus(s State) *messages.RolloutStatus {
	ro := s.Rollout
	if ro == nil {
		return nil
	}
	out := &messages.RolloutStatus{Deployment: ro.Target.Deployment, Revision: ro.Target.Revision, From: ro.From,
		Order: ro.Target.Update.Order, Paused: ro.Paused, Message: ro.Message}
	if ro.Target.Update.recreate() {
		out.Strategy = stackfile.RolloutRecreate
	}
	inBatch := map[int]bool{}
	for _, n := range ro.Batch {
		inBatch[n] = true
	}
	for n := 1; n <= ro.Target.Replicas; n++ {
		state := "pending"
		switch {
		case ro.Done[n]:
			state = "done"
		case inBatch[n] && ro.Paused:
			state = "failed"
		case inBatch[n] && !ro.Seen[n].IsZero():
			state = "monitoring"
		case inBatch[n]:
			state = "updating"
		case slotCurrent(s, n):
			state = "done"
		}
		out.Slots = append(out.Slots, messages.SlotStatus{Slot: n, State: state})
	}
	return out
}

func slotCurrent(s State, n int) bool {
	for _, r := range s.Replicas {
		if r.Slot == n && r.Revision == s.Target.Revision && r.serving() {
			return true
		}
	}
	return false
}
