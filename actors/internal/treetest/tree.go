package treetest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/root"
	"github.com/engenho/engenho/actors/service"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/messages"
	"github.com/rs/zerolog"
)

// Tree is a running supervision tree.
type Tree struct {
	Engine *actor.Engine
	Sys    *supervise.System
	Clock  clock.Clock
	Driver drivers.Driver
	Ports  *Ports
	Board  *supervise.Board
	Events *Events
	// Quiet is the node's quiet filter in front of Events (SVC-26).
	Quiet *supervise.Quiet
	Store *MemStore
	Root  *actor.PID
	Env   service.Env

	exited  chan messages.ChildExited
	deps    int
	stopped bool
}

// Options shape a Tree; zero values get test-friendly defaults.
type Options struct {
	Clock  clock.Clock
	Driver drivers.Driver // a fake driver when nil
	Log    zerolog.Logger
	Sweep  time.Duration
	// HostPorts hands out new instances' host ports; nil is the kernel's
	// pick (service.Env's default).
	HostPorts service.HostPorts
	// Events and Store, when set, are a previous tree's: a new tree on
	// them is a daemon restarted on the same journal (its event log,
	// failed revisions and pending retirements, SVC-33). The tree's quiet
	// filter (SVC-26) is seeded from the events, as the daemon seeds it
	// from its log.
	Events *Events
	Store  *MemStore
	// Ladder is the daemon's supervision.ladder: it paces every actor
	// restart that no service's own backoff does (SUP-20).
	Ladder ladder.Config
}

// New starts a tree with no stacks.
func New(o Options) (*Tree, error) {
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	if o.Driver == nil {
		o.Driver = fake.New(fake.Options{Clock: o.Clock, Seed: 1})
	}
	engine, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		return nil, err
	}
	if o.Events == nil {
		o.Events = &Events{}
	}
	if o.Store == nil {
		o.Store = NewMemStore()
	}
	t := &Tree{Engine: engine, Clock: o.Clock, Driver: o.Driver, Board: supervise.NewBoard(), Events: o.Events,
		Store: o.Store, exited: make(chan messages.ChildExited, 1)}
	t.Quiet = supervise.NewQuiet(t.Events)
	t.Quiet.Seed(t.Events.All())
	t.Ports = NewPorts()
	t.Sys = supervise.NewSystem(engine, o.Clock, o.Log)
	t.Sys.AllowInjectPanic = true // tests inject panics by path (CHS-2)
	t.Sys.OnRootExit = func(m messages.ChildExited) { t.exited <- m }
	t.Sys.Ladder = o.Ladder
	t.Sys.OnRestart = func(d supervise.Decision) { t.Quiet.Emit(supervise.RestartEvent(d, o.Clock.Now())) }
	drv := o.Driver
	t.Env = service.Env{
		Driver: func(name string) (drivers.Driver, bool) {
			return drv, name == drv.Name() || name == "" || name == "process"
		},
		Ports: t.Ports, HostPorts: o.HostPorts, Events: t.Quiet, Board: t.Board, Store: t.Store, Retirements: t.Store,
		StepTimeout: 2 * time.Minute, Sweep: o.Sweep, OutputLines: 20,
	}
	t.Root = t.Sys.SpawnRoot(supervise.ChildSpec{Name: root.Name, Produce: root.Produce(t.Env, root.Options{}, nil)})
	return t, nil
}

// Stop shuts the tree down (actors only: workloads keep running).
func (t *Tree) Stop() error {
	if t.stopped {
		return nil
	}
	t.stopped = true
	t.Engine.Send(t.Root, messages.Shutdown{})
	select {
	case <-t.exited:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("root did not stop within 30s")
	}
	return nil
}

// Apply parses a stack file and sends it as deployment dep.
func (t *Tree) Apply(name, yaml string) (messages.ApplyStack, error) {
	st, err := stackfile.Parse(name+".yaml", []byte(yaml))
	if err != nil {
		return messages.ApplyStack{}, err
	}
	st.Name = name
	t.deps++
	cur := messages.StackDeployment{ID: fmt.Sprintf("d%d", t.deps), Definition: *st}
	prev := t.Store.Current(name)
	m := messages.ApplyStack{Stack: name, Current: cur, Previous: prev, Stopped: map[string]bool{}}
	t.Store.SetCurrent(name, cur)
	t.Engine.Send(t.Root, m)
	return m, nil
}

// Send delivers m to the root.
func (t *Tree) Send(m any) { t.Engine.Send(t.Root, m) }

// WaitFor polls until cond holds or the real-time limit passes. It does not
// time anything; it only bounds how long a broken test hangs.
func (t *Tree) WaitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}

// Converged reports whether every service of stack is converged.
func (t *Tree) Converged(stack string) bool {
	svcs := t.Board.Services(stack)
	if len(svcs) == 0 {
		return false
	}
	for _, s := range svcs {
		if s.State != messages.ServiceConverged {
			return false
		}
	}
	return true
}

// Service returns the board's snapshot of one service.
func (t *Tree) Service(stack, svc string) messages.ServiceStatus {
	s, _ := t.Board.Service(stack, svc)
	return s
}

// Events records every event emitted.
type Events struct {
	mu  sync.Mutex
	all []messages.Event
}

// Emit implements the event sink.
func (e *Events) Emit(ev messages.Event) {
	e.mu.Lock()
	ev.Seq = uint64(len(e.all) + 1)
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// Kinds returns how many events of each kind were emitted.
func (e *Events) Count(kind string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// All returns a copy of every event.
func (e *Events) All() []messages.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]messages.Event(nil), e.all...)
}

// String lists the events' kinds and messages, for failure output.
func (e *Events) String() string {
	var b strings.Builder
	for _, ev := range e.All() {
		fmt.Fprintf(&b, "%s %s/%s %s: %s\n", ev.Kind, ev.Stack, ev.Service, ev.Instance, ev.Message)
	}
	return b.String()
}

// MemStore is an in-memory service.Store plus the current deployment of
// each stack.
type MemStore struct {
	mu       sync.Mutex
	failed   map[string]map[string]bool
	progress map[string][]int
	current  map[string]messages.StackDeployment
	retire   map[string]map[string]service.Retirement // stack/service -> id (SVC-33)
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{failed: map[string]map[string]bool{}, progress: map[string][]int{}, current: map[string]messages.StackDeployment{},
		retire: map[string]map[string]service.Retirement{}}
}

func (m *MemStore) FailedRevisions(stack, svc string) (map[string]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for k := range m.failed[stack+"/"+svc] {
		out[k] = true
	}
	return out, nil
}

func (m *MemStore) MarkFailed(stack, svc, dep, rev string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := stack + "/" + svc
	if m.failed[k] == nil {
		m.failed[k] = map[string]bool{}
	}
	m.failed[k][dep+"/"+rev] = true
	return nil
}

func (m *MemStore) SaveProgress(stack, svc, dep, rev string, done []int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.progress[stack+"/"+svc+"/"+dep+"/"+rev] = append([]int(nil), done...)
	return nil
}

// Progress returns the saved rollout progress keys, sorted.
func (m *MemStore) Progress() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, v := range m.progress {
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(out)
	return out
}

// Current returns a copy of stack's current deployment, if any.
func (m *MemStore) Current(stack string) *messages.StackDeployment {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.current[stack]
	if !ok {
		return nil
	}
	return &d
}

// SetCurrent records stack's current deployment.
func (m *MemStore) SetCurrent(stack string, d messages.StackDeployment) {
	m.mu.Lock()
	m.current[stack] = d
	m.mu.Unlock()
}

var _ service.RetirementStore = (*MemStore)(nil)

// PendingRetirements lists stack/svc's pending retirements (SVC-33).
func (m *MemStore) PendingRetirements(stack, svc string) ([]service.Retirement, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []service.Retirement
	for _, r := range m.retire[stack+"/"+svc] {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (m *MemStore) MarkRetirementPending(stack, svc string, r service.Retirement) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := stack + "/" + svc
	if m.retire[k] == nil {
		m.retire[k] = map[string]service.Retirement{}
	}
	m.retire[k][r.ID] = r
	return nil
}

func (m *MemStore) ClearRetirementPending(stack, svc, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.retire[stack+"/"+svc], id)
	return nil
}
