package activator

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/host"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/lease"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/edge"
	"github.com/rs/zerolog"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// appDriver is the fake driver whose instances with ports serve the test
// app in-process, on a real loopback listener. It logs every lifecycle
// call in order, so tests can check what happened before what.
type appDriver struct {
	*fake.Driver
	ctl  *control
	mu   sync.Mutex
	log  []string
	srvs map[string]*httptest.Server
	spec map[string]drivers.Spec
}

func newAppDriver(clk clock.Clock) *appDriver {
	return &appDriver{Driver: fake.New(fake.Options{Clock: clk, Seed: 1}), ctl: &control{},
		srvs: map[string]*httptest.Server{}, spec: map[string]drivers.Spec{}}
}

func (d *appDriver) record(op, name string) {
	d.mu.Lock()
	d.log = append(d.log, op+" "+name)
	d.mu.Unlock()
}

// ops returns the logged calls whose op is one of kinds.
func (d *appDriver) ops(kinds ...string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, l := range d.log {
		if slices.Contains(kinds, strings.SplitN(l, " ", 2)[0]) {
			out = append(out, l)
		}
	}
	return out
}

func (d *appDriver) Create(ctx context.Context, spec drivers.Spec) error {
	err := d.Driver.Create(ctx, spec)
	if err == nil {
		d.mu.Lock()
		d.spec[spec.Name] = spec
		d.mu.Unlock()
		d.record("create", spec.Name)
	}
	return err
}

func (d *appDriver) Start(ctx context.Context, name string) error {
	if err := d.Driver.Start(ctx, name); err != nil {
		return err
	}
	d.record("start", name)
	d.mu.Lock()
	spec := d.spec[name]
	d.mu.Unlock()
	if len(spec.Ports) == 0 {
		return nil
	}
	srv := httptest.NewServer(appHandler(spec.Env[host.EnvDataDir], d.ctl))
	d.mu.Lock()
	d.srvs[name] = srv
	d.mu.Unlock()
	return d.SetAddress(name, spec.Ports[0].Target, strings.TrimPrefix(srv.URL, "http://"))
}

func (d *appDriver) closeSrv(name string) {
	d.mu.Lock()
	srv := d.srvs[name]
	delete(d.srvs, name)
	d.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

func (d *appDriver) Stop(ctx context.Context, name string, grace time.Duration) error {
	err := d.Driver.Stop(ctx, name, grace)
	if err == nil {
		d.record("stop", name)
		d.closeSrv(name)
	}
	return err
}

func (d *appDriver) Delete(ctx context.Context, name string) error {
	err := d.Driver.Delete(ctx, name)
	if err == nil {
		d.record("delete", name)
	}
	return err
}

// die ends an instance's run as a crash would.
func (d *appDriver) die(name string) {
	d.closeSrv(name)
	d.Die(name, 137)
}

// running lists the running instances whose name contains part.
func (d *appDriver) running(part string) []string {
	list, _ := d.List(context.Background(), nil)
	var out []string
	for _, st := range list {
		if st.State == drivers.StateRunning && strings.Contains(st.Name, part) {
			out = append(out, st.Name)
		}
	}
	return out
}

func (d *appDriver) closeAll() {
	d.mu.Lock()
	names := make([]string, 0, len(d.srvs))
	for n := range d.srvs {
		names = append(names, n)
	}
	d.mu.Unlock()
	for _, n := range names {
		d.closeSrv(n)
	}
}

// memJournal is the journal in memory.
type memJournal struct {
	mu   sync.Mutex
	due  map[string]time.Time
	owed map[string]messages.OwedRelease
	sets int
}

func newMemJournal() *memJournal {
	return &memJournal{due: map[string]time.Time{}, owed: map[string]messages.OwedRelease{}}
}

func (j *memJournal) SetDue(h string, at time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sets++
	if at.IsZero() {
		delete(j.due, h)
	} else {
		j.due[h] = at
	}
	return nil
}

func (j *memJournal) DueTimes() ([]messages.DueTime, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []messages.DueTime
	for h, at := range j.due {
		out = append(out, messages.DueTime{Host: h, At: at})
	}
	return out, nil
}

func (j *memJournal) dueOf(h string) (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	at, ok := j.due[h]
	return at, ok
}

func (j *memJournal) OweRelease(r messages.OwedRelease) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.owed[r.Host] = r
	return nil
}

func (j *memJournal) SettleRelease(h, epoch string) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r, ok := j.owed[h]; ok && r.Epoch == epoch {
		delete(j.owed, h)
		return true, nil
	}
	return false, nil
}

func (j *memJournal) OwedReleases() ([]messages.OwedRelease, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []messages.OwedRelease
	for _, r := range j.owed {
		out = append(out, r)
	}
	return out, nil
}

func (j *memJournal) owes(h string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.owed[h]
	return ok
}

// recorder keeps the events.
type recorder struct {
	mu  sync.Mutex
	evs []messages.Event
}

func (r *recorder) Emit(e messages.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) all() []messages.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

func (r *recorder) count(kind string) int {
	n := 0
	for _, e := range r.all() {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func (r *recorder) last(kind string) (messages.Event, bool) {
	evs := r.all()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i], true
		}
	}
	return messages.Event{}, false
}

// node is one activator tree with its edge, as a daemon would run it.
type node struct {
	t       testing.TB
	name    string
	clk     clock.Clock
	eng     *actor.Engine
	sys     *supervise.System
	pid     *actor.PID
	table   *edge.Table
	srv     *httptest.Server
	drv     drivers.Driver
	app     *appDriver
	events  *recorder
	journal *memJournal
	store   objstore.Store
	dir     string
	exited  chan messages.ChildExited
	stopped bool
	cut     *cutStore
	metrics *metrics
	ttl     time.Duration
	env     Env
	// table2 is a spare routing table for a second activator tree.
	table2 *edge.Table
}

type nodeOpts struct {
	driver  drivers.Driver // default an appDriver
	journal *memJournal
	dir     string
	ttl     time.Duration
	tune    func(*host.Config)
	bin     string
	// slowBusy delays the publishing of a route whose host just began an
	// operation (a host actor descheduled on a loaded machine).
	slowBusy time.Duration
	// ladder is the daemon's supervision.ladder (SUP-20).
	ladder ladder.Config
}

func newNode(t testing.TB, name string, store objstore.Store, clk clock.Clock, o nodeOpts) *node {
	t.Helper()
	eng, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, name: name, clk: clk, eng: eng, table: edge.NewTable(), events: &recorder{},
		journal: o.journal, store: store, dir: o.dir, exited: make(chan messages.ChildExited, 1)}
	if n.journal == nil {
		n.journal = newMemJournal()
	}
	if n.dir == "" {
		n.dir = t.TempDir()
	}
	n.drv = o.driver
	if n.drv == nil {
		n.app = newAppDriver(clk)
		n.drv = n.app
	}
	n.cut = &cutStore{Store: store}
	n.metrics = &metrics{clk: clk}
	n.ttl = o.ttl
	if n.ttl == 0 {
		n.ttl = 30 * time.Second
	}
	n.sys = supervise.NewSystem(eng, clk, zerolog.Nop())
	n.sys.AllowInjectPanic = true // the tests inject panics (CHS-2)
	n.sys.OnRootExit = func(m messages.ChildExited) { n.exited <- m }
	n.sys.Ladder = o.ladder
	n.sys.OnRestart = func(d supervise.Decision) { n.events.Emit(supervise.RestartEvent(d, clk.Now())) }
	var routes host.Routes = n.table
	if o.slowBusy > 0 {
		routes = &slowRoutes{Table: n.table, delay: o.slowBusy}
	}
	env := Env{
		Drivers: func(string) (drivers.Driver, bool) { return n.drv, true },
		Store:   n.cut, Prefix: "engenho", NodeName: name, NodeID: "id-" + name, LeaseTTL: o.ttl,
		Journal: n.journal, Events: n.events, Routes: routes, Metrics: n.metrics, HostsDir: filepath.Join(n.dir, "hosts"),
		Bin: o.bin, Tune: o.tune, StepTimeout: 30 * time.Second,
	}
	n.env, n.table2 = env, edge.NewTable()
	n.pid = n.sys.SpawnRoot(Spec(env))
	e := edge.New(edge.Options{Table: n.table, Clock: clk})
	n.srv = httptest.NewServer(e)
	t.Cleanup(n.close)
	return n
}

func (n *node) close() {
	n.shutdown()
	n.srv.Close()
	if n.app != nil {
		n.app.closeAll()
	}
}

// shutdown drains the activator, advancing a fake clock if need be.
func (n *node) shutdown() {
	if n.stopped {
		return
	}
	n.stopped = true
	n.eng.Send(n.pid, messages.Shutdown{})
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-n.exited:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.t.Errorf("node %s did not stop", n.name)
			return
		}
		if f, ok := n.clk.(*clock.Fake); ok {
			f.Advance(time.Second)
		}
	}
}

// crash abandons the node as a machine dying would, as far as anyone
// else can tell: it never reaches the store again (no renew, no release,
// no checkpoint) and its instances die.
func (n *node) crash() {
	n.cut.down.Store(true)
	if n.app == nil {
		n.t.Fatal("crash needs the app driver")
	}
	if n.app != nil {
		for _, name := range n.app.running("") {
			n.app.die(name)
		}
	}
}

// slowRoutes publishes a route that shows a new operation only after a
// delay, as a host actor descheduled between starting an operation and
// publishing it would.
type slowRoutes struct {
	*edge.Table
	delay time.Duration
	last  sync.Map // host -> the Busy last published
}

func (r *slowRoutes) SetHost(route host.Route) {
	if prev, _ := r.last.Swap(route.Host, route.Status.Busy); route.Status.Busy != "" && prev != route.Status.Busy {
		time.Sleep(r.delay)
	}
	r.Table.SetHost(route)
}

// cutStore is a store a node can lose for good.
type cutStore struct {
	objstore.Store
	down atomic.Bool
}

func (c *cutStore) err(op, key string) error {
	return objstore.Errorf("cut", op, key, objstore.ErrTransient, "node is down")
}

func (c *cutStore) Get(ctx context.Context, key string) (*objstore.Object, error) {
	if c.down.Load() {
		return nil, c.err("get", key)
	}
	return c.Store.Get(ctx, key)
}

func (c *cutStore) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if c.down.Load() {
		return "", c.err("put", key)
	}
	return c.Store.Put(ctx, key, body, cond)
}

func (c *cutStore) Delete(ctx context.Context, key string, cond objstore.Cond) error {
	if c.down.Load() {
		return c.err("delete", key)
	}
	return c.Store.Delete(ctx, key, cond)
}

func (c *cutStore) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	if c.down.Load() {
		return nil, c.err("list", prefix)
	}
	return c.Store.List(ctx, prefix)
}

func (n *node) define(d messages.HostDefinition) { n.eng.Send(n.pid, d) }

// get sends a request through the node's edge.
func (n *node) get(hostName, path string, hdr ...string) (int, string, string) {
	n.t.Helper()
	req, _ := http.NewRequest("GET", n.srv.URL+path, nil)
	req.Host = hostName
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := n.srv.Client().Do(req)
	if err != nil {
		n.t.Fatalf("GET %s%s: %v", hostName, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), resp.Header.Get("Retry-After")
}

// state is the host's published state.
func (n *node) state(hostName string) messages.HostState {
	if r, ok := n.table.Host(hostName); ok {
		return r.Status.State
	}
	return ""
}

// eventually polls cond, advancing a fake clock by step between polls
// (step 0: never advance). It fails the test if cond never holds.
func eventually(t testing.TB, clk clock.Clock, step time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
		if f, ok := clk.(*clock.Fake); ok && step > 0 {
			f.Advance(step)
		}
	}
}

// hostDef is a hibernating service serving the app on port 80.
func hostDef(stack, name, hostName string, edit ...func(*stackfile.Service)) messages.HostDefinition {
	svc := stackfile.NewService(name)
	svc.Command = []string{"app"}
	svc.Ports = []stackfile.Port{{Target: 80, Protocol: "tcp"}}
	svc.Healthcheck.Kind, svc.Healthcheck.Path, svc.Healthcheck.StartInterval = stackfile.ProbeHTTP, "/healthz", time.Second
	svc.StopGracePeriod = stackfile.DefaultHibernatedGrace
	svc.Hibernate = &stackfile.Hibernate{Host: hostName, Idle: 15 * time.Minute, Replication: stackfile.ReplicationBatched,
		WakeTimeout: 30 * time.Second, Port: 80}
	for _, e := range edit {
		e(&svc)
	}
	return messages.HostDefinition{Stack: stack, Service: name, Deployment: "1", Revision: svc.Revision(), Definition: svc}
}

func withSidecar(name string, command ...string) func(*stackfile.Service) {
	return func(s *stackfile.Service) {
		sc := stackfile.Sidecar{Name: name, Command: command, StopGracePeriod: stackfile.DefaultSidecarGrace,
			Backoff: stackfile.SidecarBackoff{Initial: 2 * time.Second, Cap: time.Minute, ResetAfter: time.Minute}}
		s.Sidecars = append(s.Sidecars, sc)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func readLease(t testing.TB, store objstore.Store, hostName string) lease.Record {
	t.Helper()
	obj, err := store.Get(context.Background(), "engenho/"+hostName+"/lease.json")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	b, _ := io.ReadAll(obj.Body)
	rec, err := lease.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// walk advances a fake clock by total in steps of one second, letting the
// actors run in between as time passes for them in production: while a
// node holds a lease, the clock does not run ahead of its renewals.
func walk(clk *clock.Fake, total time.Duration, nodes ...*node) {
	walkUntil(clk, total, nil, nodes...)
}

// walkUntil walks at most total, stopping as soon as cond holds; it
// reports whether it did.
func walkUntil(clk *clock.Fake, total time.Duration, cond func() bool, nodes ...*node) bool {
	for d := time.Duration(0); d < total; d += time.Second {
		if cond != nil && cond() {
			return true
		}
		for _, n := range nodes {
			n.keepUp()
		}
		clk.Advance(time.Second)
		for _, n := range nodes {
			n.settle()
		}
		time.Sleep(100 * time.Microsecond)
	}
	return cond != nil && cond()
}

// settle waits until the activator and every host actor of n have handled
// what was sent to them so far: the timers that fired in Advance sent
// their messages before it returned, and an operation a timer starts is
// published as busy in the same step. Without it the walk could run the
// clock past the operation's timeout (5s for next-due: five steps of the
// walk) before the host had even published it as busy, when the machine
// is loaded: TestACT10DueSoonNotPutToSleep then saw a next-due query time
// out and the host sleep. Each actor's cell answers a Deliver to a path
// it does not have (DeliverFailed) after everything ahead of it in its
// mailbox; the activator goes first, because it forwards to the hosts.
func (n *node) settle() {
	n.barrier(n.pid)
	for _, st := range n.table.Hosts() {
		if r, ok := n.table.Host(st.Host); ok {
			n.barrier(r.PID)
		}
	}
}

func (n *node) barrier(pid *actor.PID) {
	// A dead incarnation answers nothing; the timeout only bounds that.
	_, _ = n.eng.Request(pid, messages.Deliver{Path: "settle"}, time.Second).Result()
}

// keepUp waits (a little, in real time) while a leased host of n is
// behind on its renewals.
func (n *node) keepUp() {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && n.behind() {
		time.Sleep(time.Millisecond)
	}
}

func (n *node) behind() bool {
	held := false
	for _, st := range n.table.Hosts() {
		if st.Busy != "" {
			return true // an operation in flight: let it finish first
		}
		if st.State == messages.HostAwake || st.State == messages.HostStopping {
			held = true
		}
	}
	if !held {
		return false
	}
	renewEvery := n.ttl / 3
	return n.clk.Now().Sub(n.metrics.lastRenew()) > renewEvery+2*time.Second
}

// metrics records lease operations and wake steps on the node's clock.
type metrics struct {
	clk   clock.Clock
	mu    sync.Mutex
	last  time.Time
	ops   map[string]int
	steps map[string]time.Duration
}

func (m *metrics) WakeStep(step string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.steps == nil {
		m.steps = map[string]time.Duration{}
	}
	m.steps[step] = d
}

func (m *metrics) LeaseOp(op, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ops == nil {
		m.ops = map[string]int{}
	}
	m.ops[op+"/"+outcome]++
	if (op == "renew" || op == "acquire") && outcome == "ok" {
		m.last = m.clk.Now()
	}
}

func (m *metrics) lastRenew() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

func (m *metrics) count(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops[key]
}

// failingLease fails the puts that release a lease while fail is set.
type failingLease struct {
	objstore.Store
	fail atomic.Bool
}

func (f *failingLease) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if f.fail.Load() && strings.HasSuffix(key, "lease.json") {
		b, _ := io.ReadAll(body)
		if strings.Contains(string(b), `"released":true`) {
			return "", objstore.Errorf("failing", "put", key, objstore.ErrTransient, "release refused by the test")
		}
		body = strings.NewReader(string(b))
	}
	return f.Store.Put(ctx, key, body, cond)
}

// readOnSecondNode defines notes.localhost on a second node, with an empty
// directory, over store, and returns what the host's /read answers there,
// restored from the last checkpoint.
func readOnSecondNode(t *testing.T, store objstore.Store, clk *clock.Fake) string {
	t.Helper()
	n2 := newNode(t, "n2", store, clk, nodeOpts{})
	n2.define(hostDef("web", "notes", "notes.localhost"))
	eventually(t, clk, 0, "n2 asleep", func() bool { return n2.state("notes.localhost") == messages.HostAsleep })
	_, body, _ := n2.get("notes.localhost", "/read")
	return body
}
