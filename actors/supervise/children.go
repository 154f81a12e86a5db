package supervise

import (
	"fmt"
	"strings"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
)

// Options configure a supervisor.
type Options struct {
	Strategy  Strategy
	Intensity Intensity     // DefaultIntensity when zero
	Ladder    ladder.Config // the System's ladder when zero; paces restarts
	// OnRestart, when set, is told of every restart decision (SUP-18).
	OnRestart func(Decision)
}

// Decision describes one restart decision (SUP-18).
type Decision struct {
	Actor    string
	Reason   messages.ExitReason
	Err      string
	Failures int
	At       time.Time // when the restart runs
	Group    []string  // every child the strategy restarts
	// Escalated: the supervisor gave up instead (SUP-8); Actor is the
	// supervisor, Err says why, and nothing restarts.
	Escalated bool
}

type child struct {
	spec      ChildSpec
	path      string
	pid       *actor.PID
	gen       uint64
	running   bool
	startedAt time.Time
	restarts  int
}

// stopOp stops children one at a time, in the order given, then runs then.
type stopOp struct {
	queue   []*child
	current *child
	timer   clock.Timer
	then    func()
}

// Children is a supervisor's set of children. It lives inside the
// supervising actor and is used only from its Receive.
type Children struct {
	cell   *cell
	opts   Options
	order  []*child
	byName map[string]*child
	ledger *ladder.Ledger
	win    window

	seq     uint64
	pending map[uint64]pendingRestart

	op       *stopOp
	queued   []func()
	deferred []messages.ChildExited
	exiting  bool
}

type pendingRestart struct {
	group []string
	timer clock.Timer
}

func newChildren(cl *cell, opts Options) *Children {
	if opts.Intensity == (Intensity{}) {
		opts.Intensity = DefaultIntensity()
	}
	opts.Ladder = cl.sys.ladderOr(opts.Ladder)
	return &Children{cell: cl, opts: opts, byName: map[string]*child{}, ledger: ladder.NewLedger(opts.Ladder, cl.gen), pending: map[uint64]pendingRestart{}}
}

// Start adds a child at the end of the start order and starts it now.
func (k *Children) Start(spec ChildSpec) error {
	if spec.Name == "" || strings.Contains(spec.Name, "/") {
		return fmt.Errorf("%s: child name %q: must be non-empty and contain no '/'", k.cell.path, spec.Name)
	}
	if k.find(spec.Name) != nil {
		return fmt.Errorf("%s: child %q already exists", k.cell.path, spec.Name)
	}
	if k.exiting {
		return fmt.Errorf("%s: stopping, child %q not started", k.cell.path, spec.Name)
	}
	ch := &child{spec: spec, path: k.cell.path + "/" + spec.Name}
	k.order = append(k.order, ch)
	k.byName[spec.Name] = ch
	k.spawn(ch)
	return nil
}

// Stop stops child name within its budget and forgets it; then runs after.
func (k *Children) Stop(name string, then func()) {
	k.enqueue(func() {
		ch := k.find(name)
		if ch == nil {
			k.finishOp(then)
			return
		}
		k.runStop([]*child{ch}, func() {
			k.remove(ch)
			k.ledger.Forget(name)
			k.finishOp(then)
		})
	})
}

// Restart stops child name and starts a fresh incarnation; it is the
// operator's restart and is charged to neither the ladder nor intensity.
func (k *Children) Restart(name string) error {
	if k.find(name) == nil {
		return fmt.Errorf("%s: no child %q", k.cell.path, name)
	}
	k.enqueue(func() {
		ch := k.find(name)
		if ch == nil {
			k.finishOp(nil)
			return
		}
		k.runStop([]*child{ch}, func() {
			if !k.exiting && k.find(name) == ch {
				k.spawn(ch)
			}
			k.finishOp(nil)
		})
	})
	return nil
}

// PID returns the current incarnation of child name, if it runs.
func (k *Children) PID(name string) *actor.PID {
	if ch := k.find(name); ch != nil && ch.running {
		return ch.pid
	}
	return nil
}

// Has reports whether child name is still a child (running, or waiting to
// be restarted).
func (k *Children) Has(name string) bool { return k.find(name) != nil }

// Names returns the children in start order.
func (k *Children) Names() []string {
	out := make([]string, len(k.order))
	for i, ch := range k.order {
		out[i] = ch.spec.Name
	}
	return out
}

// Ledger returns a copy of the restart ledger of every child with history.
func (k *Children) Ledger() map[string]messages.Ledger { return k.ledger.Snapshot() }

func (k *Children) find(name string) *child { return k.byName[name] }

func (k *Children) remove(ch *child) {
	if !ch.running {
		k.cell.sys.Tree.remove(ch.path, ch.gen)
	}
	delete(k.byName, ch.spec.Name)
	for i, c := range k.order {
		if c == ch {
			k.order = append(k.order[:i], k.order[i+1:]...)
			return
		}
	}
}

func (k *Children) spawn(ch *child) {
	ch.pid, ch.gen = k.cell.sys.spawn(ch.path, ch.spec.Name, ch.spec.Produce, k.cell.pid, ch.restarts)
	ch.running = true
	ch.startedAt = k.cell.sys.Clock.Now()
}

// handle takes the layer's own messages; it reports whether the actor
// itself should also see the message.
func (k *Children) handle(c *actor.Context, m any) bool {
	switch m := m.(type) {
	case messages.ChildExited:
		return k.exited(m)
	case messages.RestartDue:
		k.restartDue(m)
	case messages.StopTimedOut:
		k.stopTimedOut(m)
	}
	return false
}

func (k *Children) exited(m messages.ChildExited) bool {
	ch := k.find(m.Name)
	if ch == nil || ch.gen != m.Gen || !ch.running {
		return false
	}
	ch.running = false
	if op := k.op; op != nil && (op.current == ch || contains(op.queue, ch)) {
		if op.current == ch {
			k.advance()
		}
		return true
	}
	if k.op != nil || len(k.queued) > 0 {
		k.deferred = append(k.deferred, m)
		return true
	}
	k.failed(ch, m)
	return true
}

// failed applies the restart type, intensity, ladder and strategy to a
// child that ended on its own.
func (k *Children) failed(ch *child, m messages.ChildExited) {
	if k.exiting {
		return
	}
	if !restartable(ch.spec.Restart, m.Reason) {
		k.remove(ch)
		k.ledger.Forget(ch.spec.Name)
		return
	}
	now := k.cell.sys.Clock.Now()
	if k.win.add(k.opts.Intensity, now.UnixNano()) {
		k.escalate(ch, m)
		return
	}
	cfg := k.ladderOf(ch)
	if now.Sub(ch.startedAt) >= cfg.Stable {
		k.ledger.Forget(ch.spec.Name) // it had been stable for the window (SUP-11)
	}
	d := k.ledger.FailWith(cfg, ch.spec.Name, now, string(m.Reason))
	stopNames, group := restartPlan(k.opts.Strategy, k.Names(), ch.spec.Name)
	k.report(Decision{Actor: ch.path, Reason: m.Reason, Err: m.Err, Failures: d.Failures, At: d.At, Group: group})
	k.enqueue(func() {
		k.runStop(k.running(stopNames), func() {
			k.scheduleStart(group, d.Delay, ch.spec.Name, d.Failures, string(m.Reason))
			k.finishOp(nil)
		})
	})
}

func restartable(r RestartType, reason messages.ExitReason) bool {
	switch r {
	case Permanent:
		return true
	case Transient:
		return reason.Abnormal()
	}
	return false
}

// ladderOf is the ladder that paces ch's restarts (SUP-20).
func (k *Children) ladderOf(ch *child) ladder.Config {
	if ch.spec.Ladder.Cap != 0 {
		return ch.spec.Ladder
	}
	return k.opts.Ladder
}

// SetLadder changes the ladder of child name for its next failures (a
// service's x-engenho.backoff changed); its history is kept.
func (k *Children) SetLadder(name string, cfg ladder.Config) {
	if ch := k.find(name); ch != nil {
		ch.spec.Ladder = cfg
	}
}

// SetDefaultLadder changes the ladder of every child without one of its
// own (the zero Config: the System's); histories are kept.
func (k *Children) SetDefaultLadder(cfg ladder.Config) {
	k.opts.Ladder = k.cell.sys.ladderOr(cfg)
}

func (k *Children) report(d Decision) {
	if !d.Escalated {
		k.cell.handle.log().Warn().Str("child", d.Actor).Str("reason", string(d.Reason)).Str("err", d.Err).
			Int("failures", d.Failures).Time("next_attempt", d.At).Strs("group", d.Group).Msg("restarting child")
	}
	if k.opts.OnRestart != nil {
		k.opts.OnRestart(d)
	}
	if k.cell.sys.OnRestart != nil {
		k.cell.sys.OnRestart(d)
	}
}

// escalate ends this supervisor: its parent applies its own strategy.
func (k *Children) escalate(ch *child, m messages.ChildExited) {
	in := k.opts.Intensity
	reason := fmt.Sprintf("%s: more than %d restarts in %s; last %s ended: %s", k.cell.path, in.MaxRestarts, in.Period, ch.path, m.Reason)
	if m.Err != "" {
		reason += ": " + m.Err
	}
	k.cell.handle.log().Error().Str("child", ch.path).Msg("restart intensity exceeded, escalating")
	k.report(Decision{Actor: k.cell.path, Reason: messages.ExitEscalated, Err: reason, Escalated: true})
	k.exiting = true
	k.cell.handle.Exit(messages.ExitEscalated, nil, append([]string{reason}, m.Chain...)...)
}

func (k *Children) scheduleStart(group []string, delay time.Duration, failed string, failures int, reason string) {
	if delay <= 0 {
		k.startGroup(group)
		return
	}
	k.showWaiting(group, delay, failed, failures, reason)
	k.seq++
	self, eng, n, name := k.cell.pid, k.cell.sys.Engine, k.seq, group[0]
	t := k.cell.sys.Clock.AfterFunc(delay, func() { eng.Send(self, messages.RestartDue{Name: name, Seq: n}) })
	k.pending[n] = pendingRestart{group: group, timer: t}
}

// showWaiting publishes a node for each child of group while it waits out
// its backoff, so tree, why and status show it with its next attempt
// rather than nothing (SUP-21). The next incarnation's own node replaces
// it; the node carries the dead incarnation's gen, so nothing else does.
func (k *Children) showWaiting(group []string, delay time.Duration, failed string, failures int, reason string) {
	now := k.cell.sys.Clock.Now()
	for _, name := range group {
		ch := k.find(name)
		if ch == nil || ch.running {
			continue
		}
		detail := fmt.Sprintf("waiting out its backoff: %s ended (%s), failure %d", failed, reason, failures)
		if name != failed {
			detail = fmt.Sprintf("waiting out its backoff: restarted with %s, which ended (%s), failure %d", failed, reason, failures)
		}
		k.cell.sys.Tree.publish(Node{Path: ch.path, Gen: ch.gen, State: StateRestarting, Detail: detail,
			Restarts: ch.restarts, Since: now, NextAttempt: now.Add(delay)})
	}
}

// unshowWaiting takes down the waiting nodes of group (the restart was
// cancelled: the supervisor stops, or the child was removed).
func (k *Children) unshowWaiting(group []string) {
	for _, name := range group {
		if ch := k.find(name); ch != nil && !ch.running {
			k.cell.sys.Tree.remove(ch.path, ch.gen)
		}
	}
}

func (k *Children) restartDue(m messages.RestartDue) {
	p, ok := k.pending[m.Seq]
	if !ok {
		return
	}
	delete(k.pending, m.Seq)
	k.enqueue(func() {
		k.startGroup(p.group)
		k.finishOp(nil)
	})
}

func (k *Children) startGroup(group []string) {
	if k.exiting {
		return
	}
	for _, name := range group {
		if ch := k.find(name); ch != nil && !ch.running {
			ch.restarts++
			k.spawn(ch)
		}
	}
}

func (k *Children) running(names []string) []*child {
	var out []*child
	for _, n := range names {
		if ch := k.find(n); ch != nil && ch.running {
			out = append(out, ch)
		}
	}
	return out
}

// stopAll ends every child in reverse start order, then runs then. No
// restart happens after it has begun.
func (k *Children) stopAll(c *actor.Context, then func()) {
	k.exiting = true
	k.cancelPending()
	k.queued, k.deferred = nil, nil
	stopRest := func() { k.runStop(k.runningReverse(), then) }
	if k.op != nil {
		k.op.then = stopRest // finish the stop under way first
		return
	}
	stopRest()
}

func (k *Children) runningReverse() []*child {
	var out []*child
	for i := len(k.order) - 1; i >= 0; i-- {
		if k.order[i].running {
			out = append(out, k.order[i])
		}
	}
	return out
}

// enqueue runs op now, or after the operation under way.
func (k *Children) enqueue(op func()) {
	if k.op != nil || len(k.queued) > 0 {
		k.queued = append(k.queued, op)
		return
	}
	k.queued = append(k.queued, op)
	k.next()
}

func (k *Children) next() {
	if len(k.queued) == 0 || k.op != nil {
		return
	}
	op := k.queued[0]
	op()
}

// finishOp ends the queued operation that is running, runs then, and
// moves to the next queued one, then to ends that arrived meanwhile.
func (k *Children) finishOp(then func()) {
	if len(k.queued) > 0 {
		k.queued = k.queued[1:]
	}
	if then != nil {
		then()
	}
	if len(k.queued) > 0 {
		k.next()
		return
	}
	for len(k.deferred) > 0 && k.op == nil && len(k.queued) == 0 {
		m := k.deferred[0]
		k.deferred = k.deferred[1:]
		if ch := k.find(m.Name); ch != nil && ch.gen == m.Gen {
			k.failed(ch, m)
		}
	}
}

// runStop stops chs one at a time, each within its budget, then runs then.
func (k *Children) runStop(chs []*child, then func()) {
	k.op = &stopOp{queue: chs, then: then}
	k.advance()
}

func (k *Children) advance() {
	op := k.op
	if op.timer != nil {
		op.timer.Stop()
		op.timer = nil
	}
	op.current = nil
	for len(op.queue) > 0 {
		ch := op.queue[0]
		op.queue = op.queue[1:]
		if !ch.running {
			continue
		}
		op.current = ch
		budget := ch.spec.Shutdown
		if budget <= 0 {
			budget = DefaultShutdown
		}
		self, eng, name, gen := k.cell.pid, k.cell.sys.Engine, ch.spec.Name, ch.gen
		op.timer = k.cell.sys.Clock.AfterFunc(budget, func() { eng.Send(self, messages.StopTimedOut{Name: name, Gen: gen}) })
		eng.Send(ch.pid, messages.Shutdown{})
		return
	}
	k.op = nil
	op.then()
}

func (k *Children) stopTimedOut(m messages.StopTimedOut) {
	op := k.op
	if op == nil || op.current == nil || op.current.spec.Name != m.Name || op.current.gen != m.Gen {
		return
	}
	ch := op.current
	k.cell.handle.log().Error().Str("child", ch.path).Msg("child did not stop within its budget, killing")
	k.cell.sys.Engine.Stop(ch.pid)
	ch.running = false
	op.timer = nil
	k.advance()
}

func (k *Children) cancelPending() {
	for n, p := range k.pending {
		p.timer.Stop()
		k.unshowWaiting(p.group)
		delete(k.pending, n)
	}
}

func (k *Children) cancelTimers() {
	k.cancelPending()
	if k.op != nil && k.op.timer != nil {
		k.op.timer.Stop()
	}
}

func (k *Children) routeRestart(c *actor.Context, m messages.RestartChild) {
	for _, ch := range k.order {
		switch {
		case ch.path == m.Path:
			err := k.Restart(ch.spec.Name)
			c.Respond(messages.RestartChildResult{Path: m.Path, Err: errText(err)})
			return
		case strings.HasPrefix(m.Path, ch.path+"/") && ch.running:
			c.Engine().SendWithSender(ch.pid, m, c.Sender())
			return
		}
	}
	c.Respond(messages.RestartChildResult{Path: m.Path, Err: "no actor at " + m.Path})
}

// route returns the running child at path or on the way to it.
func (k *Children) route(path string) *actor.PID {
	for _, ch := range k.order {
		if ch.running && (ch.path == path || strings.HasPrefix(path, ch.path+"/")) {
			return ch.pid
		}
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func contains(chs []*child, ch *child) bool {
	for _, c := range chs {
		if c == ch {
			return true
		}
	}
	return false
}
