package fake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
)

// DriverName is the fake's config name.
const DriverName = "fake"

// Operation names, as FailNext, SetLatency, HangNext and Calls take them.
const (
	OpValidate = "validate"
	OpCreate   = "create"
	OpStart    = "start"
	OpStop     = "stop"
	OpKill     = "kill"
	OpDelete   = "delete"
	OpInspect  = "inspect"
	OpExec     = "exec"
	OpLogs     = "logs"
	OpList     = "list"
	OpWatch    = "watch"
	OpUsage    = "usage"
)

// Options configure a fake driver.
type Options struct {
	// Clock drives latency, program sleeps, Stop's grace and DieAt; default
	// the wall clock.
	Clock clock.Clock
	// Seed makes FailRate and pids reproducible.
	Seed uint64
}

// Driver is the in-memory driver. All state is behind one mutex; hooks may
// be called at any time from any goroutine.
type Driver struct {
	clk clock.Clock

	mu        sync.Mutex
	rng       *rand.Rand
	instances map[string]*instance
	byService drivers.ServiceIndex // names by stack and service, for List
	faults    map[string]*fault
	calls     map[string]int
	starts    map[string]int // survives Delete: "how often was NAME started"
	execFn    func(name string, argv []string) (drivers.ExecResult, error)
	programs  map[string]Program // per-name overrides of ProgramFor
	nextPid   int
	nextRun   uint64
	nextWatch uint64
	vols      volumeSet // volumes.go
}

// fault is what is armed for one op.
type fault struct {
	failNext []error // kinds, consumed front first
	failRate float64
	rateKind error
	latency  time.Duration
	hangNext int
}

// New returns an empty fake driver.
func New(opts Options) *Driver {
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	return &Driver{
		clk:       opts.Clock,
		rng:       rng,
		instances: make(map[string]*instance),
		byService: drivers.ServiceIndex{},
		faults:    make(map[string]*fault),
		calls:     make(map[string]int),
		starts:    make(map[string]int),
		programs:  make(map[string]Program),
		nextPid:   1000 + rng.IntN(9000),
	}
}

// Name is "fake".
func (d *Driver) Name() string { return DriverName }

// FailNext makes the next n calls of op fail with an *drivers.Error of kind
// (drivers.ErrTransient and the like).
func (d *Driver) FailNext(op string, n int, kind error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.fault(op)
	for range n {
		f.failNext = append(f.failNext, kind)
	}
}

// FailRate makes each call of op fail with kind with probability p, drawn
// from the seeded generator. p = 0 turns it off.
func (d *Driver) FailRate(op string, p float64, kind error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.fault(op)
	f.failRate, f.rateKind = p, kind
}

// SetLatency delays every call of op by dl on the driver's clock (0 turns
// it off). A delayed call returns early, ErrTransient, if its ctx ends.
func (d *Driver) SetLatency(op string, dl time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fault(op).latency = dl
}

// HangNext makes the next n calls of op block until their ctx ends; they
// then fail ErrTransient. Watch takes no ctx and never hangs.
func (d *Driver) HangNext(op string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fault(op).hangNext += n
}

// ClearFaults disarms every fault.
func (d *Driver) ClearFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = make(map[string]*fault)
}

// SetExec scripts Exec: fn's result is returned for every Exec on a running
// instance. nil restores the default (Shell's reading of `sh -c SCRIPT`,
// exit 0 for anything else).
func (d *Driver) SetExec(fn func(name string, argv []string) (drivers.ExecResult, error)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.execFn = fn
}

// SetProgram makes every later run of name follow p instead of the
// default ProgramFor(spec.Command). The name need not exist yet.
func (d *Driver) SetProgram(name string, p Program) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.programs[name] = p
}

// SetAddress makes Status.Addresses of name map target to addr (while it
// runs), overriding the 127.0.0.1:HostPort the spec gives.
func (d *Driver) SetAddress(name string, target int, addr string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.instances[name]
	if !ok {
		return drivers.Errorf(DriverName, "set address", name, drivers.ErrNotFound, "")
	}
	in.addrOverride[target] = addr
	return nil
}

// Die ends the current run of name with exit code code (Watch fires), as
// if the workload crashed. It reports whether the instance was running.
func (d *Driver) Die(name string, code int) bool {
	return d.DieWith(name, drivers.Exit{ExitCode: code})
}

// DieWith ends the current run of name with e's code, signal and reason,
// as a backend reports an OOM kill: DieWith(name, drivers.Exit{Signal:
// "killed", Reason: "oom-killed (limit 64 MiB)"}). It reports whether the
// instance was running.
func (d *Driver) DieWith(name string, e drivers.Exit) bool {
	d.mu.Lock()
	in, ok := d.instances[name]
	if !ok || in.state != drivers.StateRunning {
		d.mu.Unlock()
		return false
	}
	fire := d.endRunWith(in, e.ExitCode, e.Signal, e.Reason)
	d.mu.Unlock()
	fire()
	return true
}

// SetUsage makes Usage of name report u while it runs (DRV-16). Without
// it a running instance is one process of 1 MiB.
func (d *Driver) SetUsage(name string, u drivers.Usage) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.instances[name]
	if !ok {
		return drivers.Errorf(DriverName, "set usage", name, drivers.ErrNotFound, "")
	}
	in.usage = &u
	return nil
}

// DieAt makes name die with code at t on the driver's clock (at once when
// t is not in the future), if it is running then.
func (d *Driver) DieAt(name string, t time.Time, code int) {
	wait := t.Sub(d.clk.Now())
	if wait <= 0 {
		d.Die(name, code)
		return
	}
	d.clk.AfterFunc(wait, func() { d.Die(name, code) })
}

// ForceState makes Inspect and List report st for name (e.g. starting,
// restarting, paused, unknown) whatever its real state, until called
// again with "". The real state still drives every operation.
func (d *Driver) ForceState(name string, st drivers.State) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.instances[name]
	if !ok {
		return drivers.Errorf(DriverName, "force state", name, drivers.ErrNotFound, "")
	}
	in.forced = st
	return nil
}

// Restart makes something other than the caller restart name, as a
// backend or an operator might: the run ends as killed (its watches fire)
// and a new one begins at once with a new StartedAt and pid (SVC-9). It is
// not counted by Starts. It reports whether name was running.
func (d *Driver) Restart(name string) bool {
	d.mu.Lock()
	in, ok := d.instances[name]
	if !ok || in.state != drivers.StateRunning {
		d.mu.Unlock()
		return false
	}
	fire := d.endRun(in, -1, "killed")
	then := d.beginRun(in)
	d.mu.Unlock()
	fire()
	then()
	return true
}

// Rerun starts a new run of the running instance name, with a new
// StartedAt and pid, firing no watch: a restart the caller's watch did
// not see (a lost event stream, a backend that re-executed the workload),
// which only an inspection finds (SVC-9). It reports whether name was
// running.
func (d *Driver) Rerun(name string) bool {
	d.mu.Lock()
	in, ok := d.instances[name]
	if !ok || in.state != drivers.StateRunning {
		d.mu.Unlock()
		return false
	}
	if in.timer != nil {
		in.timer.Stop()
		in.timer = nil
	}
	close(in.runDone) // the old run is over, unseen
	then := d.beginRun(in)
	d.mu.Unlock()
	then()
	return true
}

// Vanish removes the instance name as if someone deleted it behind the
// caller's back, firing no watch: only an inspection finds it missing
// (SVC-8). It reports whether name existed.
func (d *Driver) Vanish(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.instances[name]
	if !ok {
		return false
	}
	if in.timer != nil {
		in.timer.Stop()
	}
	delete(d.instances, name)
	d.byService.Remove(name, in.spec.Labels)
	return true
}

// Calls reports how many times op was called (faulted calls included).
func (d *Driver) Calls(op string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[op]
}

// Starts reports how many runs of name began, across deletes.
func (d *Driver) Starts(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.starts[name]
}

// Len reports how many instances exist.
func (d *Driver) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.instances)
}

func (d *Driver) fault(op string) *fault {
	f, ok := d.faults[op]
	if !ok {
		f = &fault{}
		d.faults[op] = f
	}
	return f
}

// enter counts a call of op and applies its faults: hang, latency, then
// failure. A nil ctx (Watch) skips hang and latency.
func (d *Driver) enter(ctx context.Context, op, name string) error {
	d.mu.Lock()
	d.calls[op]++
	var hang bool
	var latency time.Duration
	var fail error
	if f, ok := d.faults[op]; ok {
		if f.hangNext > 0 && ctx != nil {
			f.hangNext--
			hang = true
		}
		latency = f.latency
		switch {
		case len(f.failNext) > 0:
			fail, f.failNext = f.failNext[0], f.failNext[1:]
		case f.failRate > 0 && d.rng.Float64() < f.failRate:
			fail = f.rateKind
		}
	}
	d.mu.Unlock()

	if ctx != nil && hang {
		<-ctx.Done()
		return drivers.Wrap(DriverName, op, name, drivers.ErrTransient, fmt.Errorf("injected hang: %w", ctx.Err()))
	}
	if ctx != nil && latency > 0 {
		t := d.clk.NewTimer(latency)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return drivers.Wrap(DriverName, op, name, drivers.ErrTransient, ctx.Err())
		}
	}
	if fail != nil {
		return drivers.Errorf(DriverName, op, name, fail, "injected fault")
	}
	if ctx != nil && ctx.Err() != nil {
		return drivers.Wrap(DriverName, op, name, drivers.ErrTransient, ctx.Err())
	}
	return nil
}

// ChangePid gives the running instance name a new pid with the same
// start time, firing no watch, as a backend that re-executed the workload
// in place would: the evidence a probe gathered is stale (SVC-31). It
// reports whether name was running.
func (d *Driver) ChangePid(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.instances[name]
	if !ok || in.state != drivers.StateRunning {
		return false
	}
	d.nextPid++
	in.pid = d.nextPid
	return true
}
