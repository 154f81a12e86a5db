package fake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
)

// instance is one record. Guarded by Driver.mu.
type instance struct {
	spec         drivers.Spec
	state        drivers.State
	startedAt    time.Time
	lastStart    time.Time
	pid          int
	lastExit     drivers.Exit
	run          uint64        // which run is current (driver-wide counter)
	runDone      chan struct{} // closed when the current run ends
	program      Program
	step         int  // next step of program
	waited       bool // the wait of program.Steps[step] is over
	status       int  // status of the last step
	ignoreTerm   bool
	timer        clock.Timer // the sleep in progress, if any
	watches      map[uint64]*drivers.OnceWatch
	logs         *logBuf
	addrOverride map[int]string
	forced       drivers.State  // reported instead of state when set
	usage        *drivers.Usage // SetUsage's, reported while running
}

// watch is one Watch registration; done makes it fire at most once and
// never after stop.

func noop() {}

func (d *Driver) errorf(op, name string, kind error, format string, args ...any) error {
	return drivers.Errorf(DriverName, op, name, kind, format, args...)
}

// lookup returns the named instance; d.mu must be held.
func (d *Driver) lookup(op, name string) (*instance, error) {
	in, ok := d.instances[name]
	if !ok {
		return nil, d.errorf(op, name, drivers.ErrNotFound, "")
	}
	return in, nil
}

// Validate checks the name and ports; the fake runs any command.
func (d *Driver) Validate(ctx context.Context, spec drivers.Spec) error {
	if err := d.enter(ctx, OpValidate, spec.Name); err != nil {
		return err
	}
	return checkSpec(OpValidate, spec)
}

func checkSpec(op string, spec drivers.Spec) error {
	if err := drivers.CheckName(spec.Name); err != nil {
		return drivers.Wrap(DriverName, op, spec.Name, drivers.ErrInvalid, err)
	}
	for _, p := range spec.Ports {
		if p.Target < 1 || p.Target > 65535 || p.HostPort < 0 || p.HostPort > 65535 {
			return drivers.Errorf(DriverName, op, spec.Name, drivers.ErrInvalid, "port %d->%d out of range", p.HostPort, p.Target)
		}
	}
	return nil
}

// Create records a stopped instance.
func (d *Driver) Create(ctx context.Context, spec drivers.Spec) error {
	if err := d.enter(ctx, OpCreate, spec.Name); err != nil {
		return err
	}
	if err := checkSpec(OpCreate, spec); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.instances[spec.Name]; ok {
		return d.errorf(OpCreate, spec.Name, drivers.ErrInvalid, "instance exists")
	}
	d.instances[spec.Name] = &instance{
		spec:         cloneSpec(spec),
		state:        drivers.StateStopped,
		lastExit:     drivers.Exit{Name: spec.Name, ExitCode: -1},
		watches:      make(map[uint64]*drivers.OnceWatch),
		logs:         newLogBuf(),
		addrOverride: make(map[int]string),
	}
	d.byService.Add(spec.Name, spec.Labels)
	d.addVolumes(spec)
	return nil
}

// Start begins a run: running, StartedAt = clock.Now(), and the program's
// first steps.
func (d *Driver) Start(ctx context.Context, name string) error {
	if err := d.enter(ctx, OpStart, name); err != nil {
		return err
	}
	d.mu.Lock()
	in, err := d.lookup(OpStart, name)
	if err != nil || in.state == drivers.StateRunning {
		d.mu.Unlock()
		return err
	}
	d.starts[name]++
	fire := d.beginRun(in)
	d.mu.Unlock()
	fire()
	return nil
}

// beginRun starts a run of in; d.mu must be held. StartedAt is
// clock.Now(), nudged past the previous run's so every run has its own.
// The returned func must run once d.mu is released.
func (d *Driver) beginRun(in *instance) func() {
	now := d.clk.Now()
	if !now.After(in.lastStart) {
		now = in.lastStart.Add(time.Nanosecond)
	}
	d.nextRun++
	d.nextPid++
	in.run, in.state, in.startedAt, in.lastStart, in.pid = d.nextRun, drivers.StateRunning, now, now, d.nextPid
	in.runDone = make(chan struct{})
	in.program = d.programFor(in.spec)
	in.step, in.waited, in.status, in.ignoreTerm = 0, false, 0, false
	return d.advance(in)
}

func (d *Driver) programFor(spec drivers.Spec) Program {
	if p, ok := d.programs[spec.Name]; ok {
		return p
	}
	return ProgramFor(spec.Command)
}

// advance runs in's program until a sleep or the end; d.mu must be held.
// It returns what must run once d.mu is released (watch callbacks).
func (d *Driver) advance(in *instance) func() {
	for in.step < len(in.program.Steps) {
		s := in.program.Steps[in.step]
		if s.Wait > 0 && !in.waited {
			in.waited = true
			name, run := in.spec.Name, in.run
			in.timer = d.clk.AfterFunc(s.Wait, func() { d.resume(name, run) })
			return noop
		}
		in.step++
		in.waited = false
		in.logs.write(s.Stdout)
		in.logs.write(s.Stderr)
		if s.IgnoreTerm {
			in.ignoreTerm = true
		}
		if s.Exit {
			code := s.Status
			if code == -2 {
				code = in.status
			}
			return d.endRun(in, code, "")
		}
		in.status = s.Status
	}
	if in.program.Forever {
		return noop
	}
	return d.endRun(in, in.status, "")
}

// resume continues run of name after a sleep.
func (d *Driver) resume(name string, run uint64) {
	d.mu.Lock()
	in, ok := d.instances[name]
	if !ok || in.run != run || in.state != drivers.StateRunning {
		d.mu.Unlock()
		return
	}
	in.timer = nil
	fire := d.advance(in)
	d.mu.Unlock()
	fire()
}

// endRun stops the current run; d.mu must be held. signal "" means the
// workload exited with code; otherwise the exit code is -1. The returned
// func fires the watches (in registration order) and must run after d.mu
// is released.
func (d *Driver) endRun(in *instance, code int, signal string) func() {
	return d.endRunWith(in, code, signal, "")
}

func (d *Driver) endRunWith(in *instance, code int, signal, reason string) func() {
	if signal != "" {
		code = -1
	}
	exit := drivers.Exit{Name: in.spec.Name, ExitCode: code, Signal: signal, Reason: reason, At: d.clk.Now()}
	in.state, in.startedAt, in.pid, in.lastExit = drivers.StateStopped, time.Time{}, 0, exit
	if in.timer != nil {
		in.timer.Stop()
		in.timer = nil
	}
	close(in.runDone)
	ids := slices.Sorted(maps.Keys(in.watches))
	ws := make([]*drivers.OnceWatch, 0, len(ids))
	for _, id := range ids {
		ws = append(ws, in.watches[id])
	}
	clear(in.watches)
	if len(ws) == 0 {
		return noop
	}
	return func() {
		for _, w := range ws {
			w.Fire(exit)
		}
	}
}

// Stop ends the run at once, or, when the program ignores SIGTERM, after
// grace on the driver's clock (with a fake clock the test must advance it).
func (d *Driver) Stop(ctx context.Context, name string, grace time.Duration) error {
	if err := d.enter(ctx, OpStop, name); err != nil {
		return err
	}
	d.mu.Lock()
	in, err := d.lookup(OpStop, name)
	if err != nil || in.state != drivers.StateRunning {
		d.mu.Unlock()
		return err
	}
	if !in.ignoreTerm {
		fire := d.endRun(in, -1, "terminated")
		d.mu.Unlock()
		fire()
		return nil
	}
	done, run := in.runDone, in.run
	d.mu.Unlock()
	if grace > 0 {
		t := d.clk.NewTimer(grace)
		select {
		case <-done:
			t.Stop()
			return nil
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return drivers.Wrap(DriverName, OpStop, name, drivers.ErrTransient, ctx.Err())
		}
	}
	d.killRun(name, run)
	return nil
}

// killRun ends run of name with SIGKILL if it is still current.
func (d *Driver) killRun(name string, run uint64) {
	d.mu.Lock()
	in, ok := d.instances[name]
	if !ok || in.run != run || in.state != drivers.StateRunning {
		d.mu.Unlock()
		return
	}
	fire := d.endRun(in, -1, "killed")
	d.mu.Unlock()
	fire()
}

// Kill ends the run at once.
func (d *Driver) Kill(ctx context.Context, name string) error {
	if err := d.enter(ctx, OpKill, name); err != nil {
		return err
	}
	d.mu.Lock()
	in, err := d.lookup(OpKill, name)
	run := uint64(0)
	if err == nil {
		run = in.run
	}
	d.mu.Unlock()
	if err != nil {
		return err
	}
	d.killRun(name, run)
	return nil
}

// Delete removes a stopped instance; a running one is refused.
func (d *Driver) Delete(ctx context.Context, name string) error {
	if err := d.enter(ctx, OpDelete, name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	in, err := d.lookup(OpDelete, name)
	if err != nil {
		return err
	}
	if in.state == drivers.StateRunning {
		return d.errorf(OpDelete, name, drivers.ErrInvalid, "instance is running; stop it first")
	}
	in.logs.close()
	delete(d.instances, name)
	d.byService.Remove(name, in.spec.Labels)
	return nil
}

// Inspect returns the instance's status.
func (d *Driver) Inspect(ctx context.Context, name string) (drivers.Status, error) {
	if err := d.enter(ctx, OpInspect, name); err != nil {
		return drivers.Status{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	in, err := d.lookup(OpInspect, name)
	if err != nil {
		return drivers.Status{}, err
	}
	return in.snapshot(), nil
}

// Usage reports SetUsage's value while the instance runs (one process of
// 1 MiB when none was set), zero when it is stopped (DRV-16).
func (d *Driver) Usage(ctx context.Context, name string) (drivers.Usage, error) {
	if err := d.enter(ctx, OpUsage, name); err != nil {
		return drivers.Usage{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	in, err := d.lookup(OpUsage, name)
	if err != nil || in.state != drivers.StateRunning {
		return drivers.Usage{}, err
	}
	if in.usage != nil {
		return *in.usage, nil
	}
	return drivers.Usage{Pids: 1, MemoryBytes: 1 << 20, MemoryPeakBytes: 1 << 20}, nil
}

// snapshot builds in's Status; d.mu must be held.
func (in *instance) snapshot() drivers.Status {
	st := drivers.Status{
		Name:      in.spec.Name,
		State:     in.state,
		Labels:    maps.Clone(in.spec.Labels),
		StartedAt: in.startedAt,
		Pid:       in.pid,
		ExitCode:  in.lastExit.ExitCode,
	}
	if in.forced != "" {
		st.State = in.forced
	}
	if in.state == drivers.StateRunning {
		st.Addresses = make(map[int]string, len(in.spec.Ports)+len(in.addrOverride))
		for _, p := range in.spec.Ports {
			st.Addresses[p.Target] = fmt.Sprintf("127.0.0.1:%d", p.HostPort)
		}
		maps.Copy(st.Addresses, in.addrOverride)
	}
	return st
}

// Exec returns SetExec's result, or Shell's reading of `sh -c SCRIPT`.
func (d *Driver) Exec(ctx context.Context, name string, argv []string) (drivers.ExecResult, error) {
	if err := d.enter(ctx, OpExec, name); err != nil {
		return drivers.ExecResult{}, err
	}
	d.mu.Lock()
	in, err := d.lookup(OpExec, name)
	if err == nil && in.state != drivers.StateRunning {
		err = d.errorf(OpExec, name, drivers.ErrInvalid, "instance is not running")
	}
	fn := d.execFn
	d.mu.Unlock()
	if err != nil {
		return drivers.ExecResult{}, err
	}
	if len(argv) == 0 {
		return drivers.ExecResult{}, d.errorf(OpExec, name, drivers.ErrInvalid, "empty command")
	}
	if fn != nil {
		return fn(name, argv)
	}
	script, ok := shellScript(argv)
	if !ok {
		return drivers.ExecResult{}, nil
	}
	stdout, stderr, code := runToEnd(Shell(script))
	return drivers.ExecResult{ExitCode: code, Stdout: []byte(stdout), Stderr: []byte(stderr)}, nil
}

// Logs returns the kept output (stdout and stderr in the order written).
func (d *Driver) Logs(ctx context.Context, name string, opts drivers.LogOptions) (io.ReadCloser, error) {
	if err := d.enter(ctx, OpLogs, name); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	in, err := d.lookup(OpLogs, name)
	if err != nil {
		return nil, err
	}
	tail := in.logs.tail(opts.Tail)
	if !opts.Follow {
		return snapshot(tail), nil
	}
	pos := in.logs.base + int64(len(in.logs.data)-len(tail))
	return &follower{ctx: ctx, mu: &d.mu, log: in.logs, pos: pos, done: make(chan struct{})}, nil
}

// List returns the instances whose labels include selector, by name.
func (d *Driver) List(ctx context.Context, selector drivers.Labels) ([]drivers.Status, error) {
	if err := d.enter(ctx, OpList, ""); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []drivers.Status
	add := func(in *instance) {
		if in.spec.Labels.Match(selector) {
			out = append(out, in.snapshot())
		}
	}
	if names, ok := d.byService.Candidates(selector); ok {
		for name := range names {
			add(d.instances[name])
		}
	} else {
		for _, in := range d.instances {
			add(in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Watch calls fn once when the current run ends; on an instance that is
// not running it calls fn soon (in its own goroutine) with the last exit.
// A call already begun may still be running when stop returns; none begins
// after.
func (d *Driver) Watch(name string, fn func(drivers.Exit)) (func(), error) {
	//lint:ignore SA1012 Watch takes no context: enter reads nil as "never hang or wait"
	if err := d.enter(nil, OpWatch, name); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	in, err := d.lookup(OpWatch, name)
	if err != nil {
		return nil, err
	}
	w := drivers.NewOnceWatch(fn)
	if in.state != drivers.StateRunning {
		go w.Fire(in.lastExit)
		return w.Cancel, nil
	}
	d.nextWatch++
	id := d.nextWatch
	in.watches[id] = w
	return func() {
		w.Cancel()
		d.mu.Lock()
		delete(in.watches, id)
		d.mu.Unlock()
	}, nil
}

func cloneSpec(s drivers.Spec) drivers.Spec {
	s.Labels = maps.Clone(s.Labels)
	s.Env = maps.Clone(s.Env)
	s.Command = slices.Clone(s.Command)
	s.Ports = slices.Clone(s.Ports)
	s.Mounts = slices.Clone(s.Mounts)
	s.Secrets = slices.Clone(s.Secrets)
	return s
}

var _ drivers.Driver = (*Driver)(nil)
