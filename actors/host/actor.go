package host

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/sidecar"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/drivers/objstore/lease"
	"github.com/engenho/engenho/drivers/probe"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Journal is the journal as a host uses it: its due time (ACT-10) and its
// owed lease release (ACT-8). Writes are synced.
type Journal interface {
	SetDue(host string, at time.Time) error
	OweRelease(r messages.OwedRelease) error
	SettleRelease(host, epoch string) (settled bool, err error)
}

// Metrics are optional hooks for the node's metrics (DMN-19).
type Metrics interface {
	WakeStep(step string, d time.Duration)
	LeaseOp(op, outcome string)
}

// Routes is where a host publishes its edge route: the node passes
// runtime/edge's Table, which reads the routes and the gates in them.
type Routes interface {
	SetHost(Route)
	RemoveHost(host string, pid *actor.PID)
}

// Env is what a host actor uses of the node. Everything but Drivers is
// optional in tests; a node sets all of it.
type Env struct {
	Drivers     func(name string) (drivers.Driver, bool)
	Store       objstore.Store
	Prefix      string
	Checkpoints *checkpoint.Checkpointer
	// Node names this node in leases; Holder is its lease holder id (NODE/NODE_ID, stable across daemon runs).
	Node, Holder string
	LeaseTTL     time.Duration
	Journal      Journal
	Events       supervise.Emitter
	Metrics      Metrics
	Routes       Routes
	// Status, when set, gets every published host snapshot.
	Status func(messages.HostStatus)
	// Committed, when set, is read at every wake for the host's committed
	// definition (ACT-4); else the actor's latest HostDefinition is.
	Committed func(stack, service string) (messages.HostDefinition, bool)
	// HostsDir holds each host's directory (DATA/hosts): HOST/data is its
	// data directory unless hibernate.data_dir says otherwise.
	HostsDir string
	// Bin is the engenho binary, for ${ENGENHO_BIN}.
	Bin string
	// StepTimeout bounds each operation (a restore, a start); default 2m.
	StepTimeout time.Duration
	// TickTimeout bounds the platform tick after a due wake; default 10m.
	TickTimeout time.Duration
	// Tune, when set, adjusts the core's config (tests, node settings).
	Tune func(*Config)
}

// Defaults of Env.
const (
	DefaultStepTimeout = 2 * time.Minute
	DefaultTickTimeout = 10 * time.Minute
	// NextDueTimeout bounds the next-due query (ACT-10).
	NextDueTimeout = 5 * time.Second
)

// Well-known paths an instance may serve (ACT-10).
const (
	PathNextDue = "/.well-known/engenho/next-due"
	PathTick    = "/.well-known/engenho/tick"
)

// Environment variables a host's workloads get.
const (
	EnvDataDir     = "ENGENHO_DATA_DIR"
	EnvNextDueFile = "ENGENHO_NEXT_DUE_FILE"
)

// LabelHost is stored on a host's instances with its host name.
const LabelHost = "engenho.host"

// Params say which host the actor runs.
type Params struct {
	// Key is the actor's name under the activator.
	Key string
	// Definition returns the latest definition the activator holds, read
	// when the actor (re)starts.
	Definition func() messages.HostDefinition
	// Owed is a release this host still owes from an earlier run.
	Owed *messages.OwedRelease
}

// ShutdownBudget is the shutdown budget of a host actor under the
// activator: a sleep (sidecars 5s, instance 20s, checkpoint, release).
const ShutdownBudget = 45 * time.Second

// result is what an operation produced, filled by its goroutine before it
// reports, read by the actor after.
type result struct {
	def        messages.HostDefinition
	lease      *lease.Lease
	head       checkpoint.Head
	hasHead    bool
	sig        string
	hasSig     bool
	inst       string
	addrs      map[int]string
	unwatch    func()
	due        time.Time
	stats      checkpoint.Stats
	scanAt     time.Time // when a checkpoint's scan or a restore began (ACT-17)
	retryAfter time.Duration
	settle     func() error
}

// Actor is the host actor.
type Actor struct {
	h   *supervise.Handle
	env Env
	p   Params

	def, wakeDef messages.HostDefinition
	cfg          Config
	s            State
	ctx          context.Context
	cancel       context.CancelFunc
	seq          uint64
	ops          map[uint64]*result
	timers       *supervise.Timers
	queue        []any
	waiters      []*actor.PID
	kids         *supervise.Children

	gate      *Gate
	mgr       *lease.Manager
	lease     *lease.Lease
	head      checkpoint.Head
	sig       string
	inst      string
	addrs     map[int]string
	addr      string
	unwatch   func()
	exitEarly bool
	// settle syncs a deferred restore; settled closes when it is done.
	settle  func() error
	settled chan struct{}
	owed    *messages.OwedRelease
	prober  *probe.Prober
	client  *http.Client

	sidecars    map[string]messages.SidecarReport
	stopWaiting map[string]bool
	unproven    bool
	reported    messages.HostReport
	replicated  messages.Replicated // ACT-17
	last        messages.HostStatus
	published   bool
}

// Produce returns the producer of a host actor.
func Produce(env Env, p Params) supervise.Producer {
	if env.StepTimeout <= 0 {
		env.StepTimeout = DefaultStepTimeout
	}
	if env.TickTimeout <= 0 {
		env.TickTimeout = DefaultTickTimeout
	}
	return func(h *supervise.Handle) actor.Receiver {
		return &Actor{h: h, env: env, p: p, ops: map[uint64]*result{},
			sidecars: map[string]messages.SidecarReport{}, owed: p.Owed}
	}
}

// Key is the activator's name for a host actor: host:NAME for a
// hibernating service, worker:STACK.SERVICE for a plain standalone worker.
func Key(d messages.HostDefinition) string {
	if h := d.Definition.Hibernate; h != nil {
		return "host:" + h.Host
	}
	return "worker:" + d.Stack + "." + d.Service
}

func (a *Actor) host() string {
	if h := a.def.Definition.Hibernate; h != nil {
		return h.Host
	}
	return ""
}

func (a *Actor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.start()
	case actor.Stopped:
		a.stopped()
	case messages.Shutdown, messages.HostDrain:
		a.step(Drain{})
	case messages.HostRetire:
		a.step(Retire{})
	case messages.HostDefinition:
		a.newDefinition(m)
	case messages.HostWake:
		if c.Sender() != nil {
			a.waiters = append(a.waiters, c.Sender())
		}
		a.step(WakeAsked{Reason: m.Reason})
	case messages.HostSweep:
		a.step(Sweep{})
	case messages.HostOpDone:
		a.opDone(m)
	case messages.Timer:
		if a.timers.Fresh(m) {
			a.step(TimerFired{Name: m.Name})
		}
	case messages.HostInstanceExited:
		a.instanceExited(m)
	case messages.SidecarReport:
		a.sidecarReport(m)
	case messages.ChildExited:
		a.sidecarGone(m.Name)
	}
}

func (a *Actor) start() {
	a.h.TrapShutdown()
	a.kids = a.h.Supervise(supervise.Options{Ladder: ladder.ForActors(a.p.Definition().Definition.Engenho)})
	a.timers = supervise.NewTimers(a.h)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.def = a.p.Definition()
	a.wakeDef = a.def
	a.gate = NewGate()
	a.client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	a.step(Begin{})
}

// stopped ends goroutines, timers and the route. A workload is not
// touched: the next incarnation cleans up what this one left.
func (a *Actor) stopped() {
	if a.cancel != nil {
		a.cancel()
	}
	if a.timers != nil {
		a.timers.Stop()
	}
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
	if a.gate != nil {
		a.gate.Seal()
	}
	a.answer(false, http.StatusServiceUnavailable, DefaultRetryAfter, "host actor stopped")
	if a.env.Routes != nil && a.host() != "" {
		a.env.Routes.RemoveHost(a.host(), a.h.PID())
	}
	if a.client != nil {
		a.client.CloseIdleConnections()
	}
}

// fenceGate bounds the gate by the lease: nothing is admitted once this
// node may no longer act on it (ACT-14). Called when the gate opens and
// after every renew.
func (a *Actor) fenceGate() {
	if a.lease != nil {
		a.gate.Fence(a.lease.ValidUntil())
	}
}

// config is the core's config for the definition in force: the one the
// wake read while waking or awake, the latest while asleep.
func (a *Actor) config() Config {
	def := a.def
	if a.s.Phase != messages.HostAsleep && a.s.Phase != "" {
		def = a.wakeDef
	}
	c := ConfigOf(def.Definition)
	if a.env.LeaseTTL > 0 {
		c.RenewEvery = a.env.LeaseTTL / 3
	}
	if a.env.Tune != nil {
		a.env.Tune(&c)
	}
	return c
}

// step applies one event and everything it leads to.
func (a *Actor) step(e any) {
	a.queue = append(a.queue, e)
	for len(a.queue) > 0 {
		e := a.queue[0]
		a.queue = a.queue[1:]
		a.cfg = a.config()
		var fx []step.Effect
		a.s, fx = Step(a.cfg, a.s, e, a.h.Clock().Now())
		supervise.Apply(a.h, a.shell(), fx)
	}
	a.publish()
}

// shell is what supervise.Apply needs to perform the core's effects; its
// events carry the host as it is now.
func (a *Actor) shell() supervise.Shell {
	return supervise.Shell{
		Timers: a.timers, Events: a.env.Events, Own: a.perform,
		Event: messages.Event{Stack: a.def.Stack, Service: a.def.Service, Host: a.host(), Instance: a.inst},
	}
}

// perform runs one of the host core's own effects.
func (a *Actor) perform(f step.Effect) {
	switch f := f.(type) {
	case Do:
		a.startOp(f.Op)
	case Side:
		a.startSide(f.Op)
	case Answer:
		a.answer(f.OK, f.Status, f.RetryAfter, f.Err)
	case OpenGate:
		var stamp time.Time
		if f.Stamp {
			stamp = a.h.Clock().Now()
		}
		a.fenceGate()
		a.gate.Open(a.addr, stamp)
	case TryCloseGate:
		a.queue = append(a.queue, GateClosed{OK: a.gate.Close()})
	case SealGate:
		a.gate.Seal()
	case CheckIdle:
		a.queue = append(a.queue, IdleCheck{InFlight: a.gate.InFlight(), LastActivity: a.gate.LastActivity()})
	case StartSidecars:
		a.startSidecars()
	case StopSidecars:
		a.stopSidecars()
	case RecordWake:
		if a.env.Metrics != nil {
			for _, st := range f.Steps {
				a.env.Metrics.WakeStep(st.Step, st.Duration)
			}
		}
	}
}

func (a *Actor) answer(ok bool, status int, retry time.Duration, msg string) {
	if len(a.waiters) == 0 {
		return
	}
	res := messages.HostWakeResult{Host: a.host(), OK: ok, Status: status, RetryAfter: retry, Err: msg}
	for _, w := range a.waiters {
		a.h.Engine().Send(w, res)
	}
	a.waiters = nil
}

func (a *Actor) newDefinition(m messages.HostDefinition) {
	running := a.def
	if a.s.Phase == messages.HostAwake || a.s.Phase == messages.HostWaking {
		running = a.wakeDef
	}
	a.def = m
	a.kids.SetDefaultLadder(ladder.ForActors(m.Definition.Engenho))
	a.step(Definition{Changed: m.Revision != running.Revision, Stopped: m.Stopped})
}

func (a *Actor) instanceExited(m messages.HostInstanceExited) {
	if m.Instance != a.inst || a.inst == "" {
		return
	}
	if !a.s.Started {
		a.exitEarly = true // before the start was recorded
		return
	}
	a.step(InstanceExited{Code: m.Exit.ExitCode})
}

// publish updates the tree, the edge route, the status snapshot and, on
// a change, tells the activator.
func (a *Actor) publish() {
	a.h.SetState(string(a.s.Phase), a.s.Stage+a.s.Blocked)
	st := a.status()
	if a.published && sameStatus(st, a.last) {
		a.report()
		return
	}
	a.last, a.published = st, true
	if a.env.Status != nil {
		a.env.Status(st)
	}
	if a.env.Routes != nil && a.host() != "" && a.cfg.HasInstance {
		timeout := messages.DefaultWakeTimeout
		if h := a.def.Definition.Hibernate; h != nil && h.WakeTimeout > 0 {
			timeout = h.WakeTimeout
		}
		a.env.Routes.SetHost(Route{Host: a.host(), Stack: a.def.Stack, Service: a.def.Service,
			Engine: a.h.Engine(), PID: a.h.PID(), Gate: a.gate, WakeTimeout: timeout, Status: st})
	}
	a.report()
}

// report tells the activator what it acts on, when that changed.
func (a *Actor) report() {
	r := messages.HostReport{Key: a.p.Key, Host: a.host(), State: a.s.Phase, Due: a.s.Due, Owes: a.s.Owes, Drained: a.s.Drained}
	if r != a.reported {
		a.reported = r
		a.h.Engine().Send(a.h.Parent(), r)
	}
}

// sameStatus compares what a snapshot shows (the wake steps change only
// with Wakes).
func sameStatus(a, b messages.HostStatus) bool {
	return a.State == b.State && a.Since.Equal(b.Since) && a.Busy == b.Busy && a.Pending == b.Pending &&
		a.Instance == b.Instance && a.Address == b.Address && a.Revision == b.Revision && a.Deployment == b.Deployment &&
		a.Wakes == b.Wakes && a.Due.Equal(b.Due) && a.OwesLease == b.OwesLease && a.LastError == b.LastError &&
		a.LeaseEpoch == b.LeaseEpoch && a.Replicated == b.Replicated && a.LeaseUntil.Equal(b.LeaseUntil)
}

func (a *Actor) status() messages.HostStatus {
	st := messages.HostStatus{
		Host: a.host(), Stack: a.def.Stack, Service: a.def.Service, Revision: a.def.Revision, Deployment: a.def.Deployment,
		State: a.s.Phase, Since: a.s.Since, Due: a.s.Due, OwesLease: a.s.Owes, Wakes: a.s.Wakes,
		LastWake: append([]messages.WakeStep(nil), a.s.Wake.Steps...), LastError: a.s.LastFailure,
		Replication: a.replicationClass(), Replicated: a.replicated,
	}
	if a.s.Blocked != "" {
		st.Pending = "stop " + a.s.Blocked
	}
	var busy []string
	if a.s.Op != OpNone {
		busy = append(busy, string(a.s.Op))
	}
	if a.s.Renewing {
		busy = append(busy, string(SideRenew))
	}
	if a.s.Saving {
		busy = append(busy, string(SideCheckpoint))
	}
	st.Busy = strings.Join(busy, ",")
	if a.s.Started {
		st.Instance, st.Address = a.inst, a.addr
	}
	if a.lease != nil {
		st.LeaseEpoch = a.lease.Epoch()
		if a.s.Leased && !a.s.LeaseLost {
			st.LeaseUntil = a.lease.ValidUntil()
		}
	}
	return st
}

// dataDir is the host's data directory (ENGENHO_DATA_DIR).
func (a *Actor) dataDir(def messages.HostDefinition) string {
	if h := def.Definition.Hibernate; h != nil && h.DataDir != "" {
		return h.DataDir
	}
	return filepath.Join(a.hostDir(def), "data")
}

// hostDir is DATA/hosts/HOST, or DATA/hosts/worker.STACK.SERVICE for a
// plain worker. Host, stack and service names are validated DNS and
// service names: none can leave the directory (SEC-3).
func (a *Actor) hostDir(def messages.HostDefinition) string {
	if h := def.Definition.Hibernate; h != nil {
		return filepath.Join(a.env.HostsDir, h.Host)
	}
	return filepath.Join(a.env.HostsDir, "worker."+def.Stack+"."+def.Service)
}

func (a *Actor) workloadEnv(def messages.HostDefinition) map[string]string {
	env := map[string]string{}
	if def.Definition.Hibernate != nil {
		env[EnvDataDir] = a.dataDir(def)
		if def.Definition.Standalone() {
			env[EnvNextDueFile] = filepath.Join(a.hostDir(def), "next-due")
		}
	}
	return env
}

// startSidecars starts one sidecar actor per declared sidecar (ACT-11).
func (a *Actor) startSidecars() {
	def := a.wakeDef
	drv, ok := a.driver(def)
	if !ok {
		return
	}
	senv := sidecar.Env{Driver: drv, Events: a.env.Events, Bin: a.env.Bin, StepTimeout: a.env.StepTimeout}
	for _, sc := range def.Definition.Sidecars {
		name := "sidecar:" + sc.Name
		if a.kids.Has(name) {
			continue
		}
		p := sidecar.Params{Stack: def.Stack, Service: def.Service, Host: a.host(), Deployment: def.Deployment,
			Def: def.Definition, Sidecar: sc, Env: a.workloadEnv(def)}
		spec := supervise.ChildSpec{Name: name, Restart: supervise.Transient, Shutdown: sidecar.ShutdownBudget(sc), Produce: sidecar.Produce(senv, p)}
		if err := a.kids.Start(spec); err != nil {
			a.h.Log().Error().Err(err).Str("sidecar", sc.Name).Msg("starting sidecar")
		}
		a.sidecars[sc.Name] = messages.SidecarReport{Name: sc.Name, Phase: messages.SidecarStarting, AlwaysOn: sc.AlwaysOn}
	}
}

// stopSidecars asks every sidecar to stop, all at once (ACT-8: 5s each,
// then kill); SidecarsStopped follows when each has ended or answered
// that it could not prove it.
func (a *Actor) stopSidecars() {
	a.stopWaiting, a.unproven = map[string]bool{}, false
	for _, name := range a.kids.Names() {
		if pid := a.kids.PID(name); pid != nil {
			a.stopWaiting[name] = true
			a.h.Engine().Send(pid, messages.SidecarStop{})
			continue
		}
		a.kids.Stop(name, nil) // waiting for a restart: forget it
	}
	a.checkSidecarsStopped()
}

func (a *Actor) checkSidecarsStopped() {
	if a.stopWaiting == nil || len(a.stopWaiting) > 0 {
		return
	}
	a.stopWaiting = nil
	proven := !a.unproven
	if proven {
		a.sidecars = map[string]messages.SidecarReport{}
	}
	a.queue = append(a.queue, SidecarsStopped{Proven: proven})
}

func (a *Actor) sidecarReport(m messages.SidecarReport) {
	a.sidecars[m.Name] = m
	name := "sidecar:" + m.Name
	if a.stopWaiting != nil && a.stopWaiting[name] && m.Unproven {
		delete(a.stopWaiting, name)
		a.unproven = true
		a.checkSidecarsStoppedStep()
		return
	}
	if m.Phase == messages.SidecarDone && !a.cfg.HasInstance && a.workDone() {
		a.step(WorkerDone{})
	}
}

// workDone: every non-always_on sidecar of a worker has finished.
func (a *Actor) workDone() bool {
	some := false
	for _, r := range a.sidecars {
		if r.AlwaysOn {
			continue
		}
		some = true
		if r.Phase != messages.SidecarDone {
			return false
		}
	}
	return some
}

func (a *Actor) sidecarGone(name string) {
	if a.stopWaiting == nil || !a.stopWaiting[name] {
		return
	}
	delete(a.stopWaiting, name)
	a.checkSidecarsStoppedStep()
}

func (a *Actor) checkSidecarsStoppedStep() {
	if a.stopWaiting != nil && len(a.stopWaiting) == 0 {
		a.stopWaiting = nil
		proven := !a.unproven
		if proven {
			a.sidecars = map[string]messages.SidecarReport{}
		}
		a.step(SidecarsStopped{Proven: proven})
	}
}

func (a *Actor) driver(def messages.HostDefinition) (drivers.Driver, bool) {
	if a.env.Drivers == nil {
		return nil, false
	}
	return a.env.Drivers(def.Definition.Driver)
}

// port is the target port the edge proxies to.
func port(svc stackfile.Service) int {
	if h := svc.Hibernate; h != nil && h.Port > 0 {
		return h.Port
	}
	if len(svc.Ports) > 0 {
		return svc.Ports[0].Target
	}
	return 0
}

func epochString(e uint64) string { return strconv.FormatUint(e, 10) }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
