package activator

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/engenho/engenho/actors/host"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// The activator's pure core (layers.md, "One Step/Effect contract"): which
// host actors exist, the definitions memo, due times and owed releases,
// the sweep and the drain. Step reads no clock and does no I/O; the actor
// performs the effects it returns.

// Timer names.
const (
	// TimerSweep fires every Config.Sweep (ACT-8, ACT-10).
	TimerSweep = "sweep"
	// TimerDrain fires when the hosts did not all go to sleep within the
	// drain budget (ACT-13).
	TimerDrain = "drain"
)

// Config is what the core needs of Env.
type Config struct {
	// Sweep is the sweep interval.
	Sweep time.Duration
	// Shutdown is the activator's shutdown budget: the hosts must be
	// asleep a few seconds before it ends.
	Shutdown time.Duration
}

// drainWait is how long after shutdown began the hosts still awake are
// killed: 3s inside the budget, or half a budget shorter than that.
func (c Config) drainWait() time.Duration {
	wait := c.Shutdown - 3*time.Second
	if wait <= 0 {
		wait = c.Shutdown / 2
	}
	return wait
}

// Entry is what the activator knows of one host actor.
type Entry struct {
	Stack, Service string
	// Host is the hibernating host's name; empty for a plain worker.
	Host    string
	State   messages.HostState
	Drained bool
	Retired bool
}

// State is the activator's state. The zero value is before Started.
type State struct {
	// Children are the supervisor's children (host keys) in start order:
	// the shell sets them from supervise.Children before every step,
	// because restarts and stops run in the supervisor.
	Children []string
	// Hosts are the host actors by key.
	Hosts map[string]Entry
	// Defs mirrors the definitions memo that outlives the actor (Remember,
	// Forget): the latest definition of every host, by key.
	Defs map[string]messages.HostDefinition
	// Dues are the sleeping hosts' next due times, by host (ACT-10).
	Dues map[string]time.Time
	// Orphans are owed releases of hosts without an actor, by host (ACT-8).
	Orphans map[string]messages.OwedRelease
	// Releasing are the orphans whose release is being retried now.
	Releasing map[string]bool
	// Seen are the keys that had a host actor in this run (ACT-12).
	Seen map[string]bool
	// Draining: shutdown began (ACT-13). Ended: the actor was told to end.
	Draining, Ended bool
	// SweepArmed: the sweep timer is armed; it is only while there is
	// something to sweep (PERF-3: an activator with no host sleeps).
	SweepArmed bool
}

// Event is what Step takes: Started, SpawnFailed, messages.HostDefinition,
// messages.HostRemove, messages.HostReport, messages.Timer (a fresh
// firing), messages.ActivatorOwedDone, messages.ChildExited (after the
// supervisor took it) and messages.Shutdown.
type Event = any

// Started is the actor's start, with what outlives it: the memo's
// definitions and the journal's due times and owed releases.
type Started struct {
	Defs map[string]messages.HostDefinition
	Dues []messages.DueTime
	Owed []messages.OwedRelease
}

// SpawnFailed reports that the supervisor did not start the host actor of
// a Spawn (it is stopping, or the key is not a child name).
type SpawnFailed struct{ Key string }

// Remember writes a definition into the memo.
type Remember struct {
	step.Is
	Key string
	Def messages.HostDefinition
}

// Forget removes a definition from the memo.
type Forget struct {
	step.Is
	Key string
}

// Spawn starts the host actor for key, reading its definition from the
// memo, with the owed release it inherits (nil when none).
type Spawn struct {
	step.Is
	Key  string
	Owed *messages.OwedRelease
}

// Tell sends Msg to the running incarnation of host actor Key; with none
// running (it waits to be restarted) the message is dropped.
type Tell struct {
	step.Is
	Key string
	Msg any
}

// Retire tells host actor Key its service is gone (it sleeps and ends);
// with no incarnation running, the supervisor stops the child.
type Retire struct {
	step.Is
	Key string
}

// Kill stops host actor Key at once: it did not sleep within the drain
// budget (its lease expires). Host and State are for the log.
type Kill struct {
	step.Is
	Key, Host string
	State     messages.HostState
}

// ReleaseOwed retries an owed release of a host without an actor; the
// shell answers with messages.ActivatorOwedDone.
type ReleaseOwed struct {
	step.Is
	Owed messages.OwedRelease
}

// SetState publishes the activator's state in the tree.
type SetState struct {
	step.Is
	State string
}

// Conflict: a definition names a host another service already serves; it
// is ignored (logged as an error).
type Conflict struct {
	step.Is
	Host, Stack, Service, Owner string
}

// Step applies event e at now and returns the next state and the effects.
func Step(cfg Config, s State, e Event, now time.Time) (State, []step.Effect) {
	m := &machine{cfg: cfg, s: s.clone(), now: now}
	switch e := e.(type) {
	case Started:
		m.started(e)
	case messages.HostDefinition:
		m.define(e)
	case messages.HostRemove:
		m.remove(e)
	case messages.HostReport:
		m.report(e)
	case messages.Timer:
		switch e.Name {
		case TimerSweep:
			m.sweep()
		case TimerDrain:
			m.drainTimedOut()
		default:
			return s, refuse("unknown timer %q", e.Name)
		}
	case messages.ActivatorOwedDone:
		m.owedDone(e)
	case messages.ChildExited:
		m.childExited(e.Name)
	case messages.Shutdown:
		m.drain()
	case SpawnFailed:
		m.spawnFailed(e.Key)
	default:
		return s, refuse("unknown event %T", e)
	}
	return m.s, m.fx
}

func refuse(format string, args ...any) []step.Effect {
	return []step.Effect{step.Refuse{Reason: "activator: " + fmt.Sprintf(format, args...)}}
}

type machine struct {
	cfg Config
	s   State
	now time.Time
	fx  []step.Effect
}

func (m *machine) do(f step.Effect) { m.fx = append(m.fx, f) }

func (m *machine) started(e Started) {
	for k, d := range e.Defs {
		m.s.Defs[k] = d
	}
	for _, d := range e.Dues {
		m.s.Dues[d.Host] = d.At
	}
	for _, o := range e.Owed {
		m.s.Orphans[o.Host] = o
	}
	for _, k := range sortedKeys(e.Defs) {
		m.define(e.Defs[k])
	}
	m.armSweep()
	m.do(SetState{State: "running"})
}

// define creates or updates a host actor from a definition.
func (m *machine) define(d messages.HostDefinition) {
	key := host.Key(d)
	for _, k := range sortedKeys(m.s.Hosts) {
		if e := m.s.Hosts[k]; e.Stack == d.Stack && e.Service == d.Service && k != key && !e.Retired {
			// The service changed host (or stopped hibernating): the old
			// host sleeps and goes; the new one starts.
			m.retire(k)
		}
	}
	if e, ok := m.s.Hosts[key]; ok && (e.Stack != d.Stack || e.Service != d.Service) {
		m.do(Conflict{Host: e.Host, Stack: d.Stack, Service: d.Service, Owner: e.Stack + "/" + e.Service})
		return
	}
	m.s.Defs[key] = d
	m.do(Remember{Key: key, Def: d})
	if e, ok := m.s.Hosts[key]; ok && !e.Retired {
		m.do(Tell{Key: key, Msg: d})
		return
	}
	if m.child(key) {
		return // a retiring incarnation is still ending; started again after it
	}
	m.spawn(key, d)
}

func (m *machine) spawn(key string, d messages.HostDefinition) {
	hostName := ""
	if d.Definition.Hibernate != nil {
		hostName = d.Definition.Hibernate.Host
	}
	var owed *messages.OwedRelease
	if o, ok := m.s.Orphans[hostName]; ok && hostName != "" {
		owed = &o
		delete(m.s.Orphans, hostName)
	}
	m.do(Spawn{Key: key, Owed: owed})
	m.s.Children = append(m.s.Children, key)
	m.s.Hosts[key] = Entry{Stack: d.Stack, Service: d.Service, Host: hostName, State: messages.HostAsleep}
	m.armSweep()
	// A hibernating worker with no due time runs at its first sight in
	// this run (ACT-12).
	if hostName != "" && d.Definition.Standalone() && !m.s.Seen[key] {
		if _, due := m.s.Dues[hostName]; !due && !d.Stopped {
			m.do(Tell{Key: key, Msg: messages.HostWake{Host: hostName, Reason: messages.WakeDeploy}})
		}
	}
	m.s.Seen[key] = true
}

// spawnFailed forgets a host actor the supervisor did not start. That
// happens only while the supervisor stops (nothing starts after it) or
// for a key that is not a child name (it never starts).
func (m *machine) spawnFailed(key string) {
	delete(m.s.Hosts, key)
	m.s.Children = slices.DeleteFunc(m.s.Children, func(k string) bool { return k == key })
}

func (m *machine) remove(r messages.HostRemove) {
	for _, k := range sortedKeys(m.s.Hosts) {
		if e := m.s.Hosts[k]; e.Stack == r.Stack && e.Service == r.Service && !e.Retired {
			m.retire(k)
		}
	}
}

func (m *machine) retire(key string) {
	e := m.s.Hosts[key]
	e.Retired = true
	m.s.Hosts[key] = e
	delete(m.s.Defs, key)
	m.do(Forget{Key: key})
	delete(m.s.Dues, e.Host)
	m.do(Retire{Key: key})
}

func (m *machine) report(r messages.HostReport) {
	e, ok := m.s.Hosts[r.Key]
	if !ok {
		return
	}
	e.State, e.Drained = r.State, r.Drained
	m.s.Hosts[r.Key] = e
	if e.Host != "" && !e.Retired {
		if r.Due.IsZero() {
			delete(m.s.Dues, e.Host)
		} else {
			m.s.Dues[e.Host] = r.Due
		}
	}
	if !m.s.Draining {
		return
	}
	if !r.Drained && r.State == messages.HostAsleep {
		// A host that restarted since the drain began hears it again.
		m.do(Tell{Key: r.Key, Msg: messages.HostDrain{}})
	}
	m.maybeDrained()
}

func (m *machine) childExited(key string) {
	e, ok := m.s.Hosts[key]
	if !ok {
		return
	}
	if m.child(key) {
		e.Drained = false // being restarted
		m.s.Hosts[key] = e
		return
	}
	delete(m.s.Hosts, key)
	if def, ok := m.s.Defs[key]; ok && def.Stack != "" && !m.s.Draining {
		m.define(def) // redefined while it was retiring
	}
	if m.s.Draining {
		m.maybeDrained()
	}
}

// armSweep arms the next sweep, unless one is armed, while there is
// something to sweep: a host, or the owed release of a host without an
// actor. An activator with neither arms no timer (PERF-3); the first host
// spawned arms it.
func (m *machine) armSweep() {
	if m.s.Draining || m.s.SweepArmed || len(m.s.Hosts) == 0 && len(m.s.Orphans) == 0 {
		return
	}
	m.do(step.Arm{Timer: TimerSweep, At: m.now.Add(m.cfg.Sweep)})
	m.s.SweepArmed = true
}

// sweep wakes every sleeping host whose due time came (ACT-10), nudges
// each host to retry what waits (a pending stop, an owed release, ACT-8),
// and retries the owed releases of hosts without an actor.
func (m *machine) sweep() {
	m.s.SweepArmed = false // it fired
	if m.s.Draining {
		return
	}
	for _, key := range sortedKeys(m.s.Hosts) {
		e := m.s.Hosts[key]
		if e.Retired || !m.child(key) {
			continue
		}
		m.do(Tell{Key: key, Msg: messages.HostSweep{}})
		if at, ok := m.s.Dues[e.Host]; ok && e.Host != "" && !at.After(m.now) && e.State == messages.HostAsleep {
			m.do(Tell{Key: key, Msg: messages.HostWake{Host: e.Host, Reason: messages.WakeDue}})
		}
	}
	for _, h := range sortedKeys(m.s.Orphans) {
		if m.s.Releasing[h] {
			continue
		}
		m.s.Releasing[h] = true
		m.do(ReleaseOwed{Owed: m.s.Orphans[h]})
	}
	m.armSweep()
}

func (m *machine) owedDone(r messages.ActivatorOwedDone) {
	delete(m.s.Releasing, r.Host)
	if !r.Settled {
		return
	}
	delete(m.s.Orphans, r.Host)
	m.do(step.Emit{Kind: messages.KindLeaseReleaseSettled, Level: messages.LevelInfo, Host: r.Host,
		Message: "owed lease release settled"})
}

// drain: shutdown began (ACT-13). Nothing wakes from now on; every host
// goes to sleep (final checkpoint, lease release) before the activator
// ends, within its budget.
func (m *machine) drain() {
	if m.s.Draining {
		return
	}
	m.s.Draining, m.s.SweepArmed = true, false
	m.do(SetState{State: "draining"})
	m.do(step.Cancel{Timer: TimerSweep})
	for _, key := range m.s.Children {
		m.do(Tell{Key: key, Msg: messages.HostDrain{}})
	}
	m.do(step.Arm{Timer: TimerDrain, At: m.now.Add(m.cfg.drainWait())})
	m.maybeDrained()
}

func (m *machine) maybeDrained() {
	for _, key := range m.s.Children {
		if e, ok := m.s.Hosts[key]; !ok || !e.Drained {
			return // still sleeping, retiring or restarting
		}
	}
	m.exit()
}

// drainTimedOut: some host did not get to sleep in time; it is killed
// (its lease expires) so the daemon can exit within its budget.
func (m *machine) drainTimedOut() {
	if !m.s.Draining {
		return
	}
	for _, key := range m.s.Children {
		if e, ok := m.s.Hosts[key]; ok && !e.Drained {
			m.do(Kill{Key: key, Host: e.Host, State: e.State})
		}
	}
	m.exit()
}

func (m *machine) exit() {
	if m.s.Ended {
		return
	}
	m.s.Ended = true
	m.do(step.Cancel{Timer: TimerDrain})
	m.do(step.End{Reason: messages.ExitShutdown})
}

// child reports whether key is one of the supervisor's children (running,
// or waiting to be restarted).
func (m *machine) child(key string) bool { return slices.Contains(m.s.Children, key) }

// clone copies s so that Step never changes the state it was given.
func (s State) clone() State {
	s.Children = slices.Clone(s.Children)
	s.Hosts = cloneMap(s.Hosts)
	s.Defs = cloneMap(s.Defs)
	s.Dues = cloneMap(s.Dues)
	s.Orphans = cloneMap(s.Orphans)
	s.Releasing = cloneMap(s.Releasing)
	s.Seen = cloneMap(s.Seen)
	return s
}

// cloneMap is maps.Clone, with an empty map for nil (the zero State).
func cloneMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return maps.Clone(m)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
