package process

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/cgroup"
)

// Operation names used in errors.
const (
	opValidate = "validate"
	opCreate   = "create"
	opStart    = "start"
	opStop     = "stop"
	opKill     = "kill"
	opDelete   = "delete"
	opInspect  = "inspect"
	opExec     = "exec"
	opLogs     = "logs"
	opList     = "list"
	opWatch    = "watch"
	opUsage    = "usage"
)

// Validate checks that spec can run here: a valid name, a command that
// resolves, an existing working directory, a known user, sane ports.
func (d *Driver) Validate(ctx context.Context, spec drivers.Spec) error {
	if err := d.checkSpec(spec); err != nil {
		return drivers.Wrap(DriverName, opValidate, spec.Name, drivers.ErrInvalid, err)
	}
	return nil
}

// checkSpec is checkSpec plus the limits this node can enforce (DRV-17).
func (d *Driver) checkSpec(spec drivers.Spec) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	if err := d.checkExternal(spec); err != nil { // mounts.go
		return err
	}
	if err := d.checkSecretsUsable(spec); err != nil {
		return err
	}
	return d.checkLimits(spec.Resources)
}

// Create validates spec and records a stopped instance on disk.
func (d *Driver) Create(ctx context.Context, spec drivers.Spec) error {
	if err := d.checkSpec(spec); err != nil {
		return drivers.Wrap(DriverName, opCreate, spec.Name, drivers.ErrInvalid, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.errorf(opCreate, spec.Name, drivers.ErrInvalid, "driver closed")
	}
	if _, ok := d.instances[spec.Name]; ok {
		return d.errorf(opCreate, spec.Name, drivers.ErrInvalid, "instance exists")
	}
	dir := filepath.Join(d.opts.Dir, "instances", spec.Name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return d.errorf(opCreate, spec.Name, drivers.ErrInvalid, "%s exists on disk but is not a loadable instance", dir)
		}
		return drivers.Wrap(DriverName, opCreate, spec.Name, drivers.ErrTransient, err)
	}
	rec := &record{Spec: cloneSpec(spec), ExitCode: -1, NextToken: newRunToken()}
	if err := d.sealSecrets(rec); err != nil {
		os.Remove(dir)
		return d.errorf(opCreate, spec.Name, drivers.ErrInvalid, "%v", err)
	}
	in := d.newInstance(dir, rec)
	f, err := in.logs.openForWorkload()
	if err == nil {
		f.Close()
		err = rec.save(dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return drivers.Wrap(DriverName, opCreate, spec.Name, drivers.ErrTransient, err)
	}
	d.instances[spec.Name] = in
	d.byService.Add(spec.Name, in.rec.Spec.Labels)
	return nil
}

// Start runs the instance's command in its own process group, output to
// its log, and watches for its exit. Starting a running instance is a
// no-op.
func (d *Driver) Start(ctx context.Context, name string) error {
	in, err := d.lockLive(opStart, name)
	if err != nil {
		return err
	}
	killed, err := d.startLocked(ctx, in)
	in.mu.Unlock()
	if killed != nil {
		d.waitRun(ctx, opStart, name, killed)
	}
	return err
}

// startLocked starts a run of in; in.mu must be held. When the run started
// but could not be recorded it is killed, and killed is its done channel.
func (d *Driver) startLocked(ctx context.Context, in *instance) (killed <-chan struct{}, err error) {
	name := in.name
	if in.proc != nil {
		return nil, nil
	}
	if in.secretsLost != nil {
		return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrInvalid, in.secretsLost)
	}
	spec := in.rec.Spec
	// The program resolved earlier is reused while it is still executable
	// (one stat on the restart path); otherwise it is looked up again.
	if in.prog == "" || isExecutable(in.prog) != nil {
		prog, err := resolveCommand(spec)
		if err != nil {
			return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrInvalid, err)
		}
		in.prog = prog
	}
	id, err := credentialFor(spec.User)
	if err != nil {
		return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrInvalid, err)
	}
	hostPorts, err := assignPorts(d.opts.HostPorts, spec.Ports, in.rec.HostPorts)
	if err != nil {
		return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrTransient, err)
	}
	if err := in.logs.rotateIfFull(); err != nil {
		d.log.Warn().Err(err).Str("instance", name).Msg("log rotation failed")
	}
	out, err := in.logs.openForWorkload()
	if err != nil {
		return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrTransient, err)
	}
	defer out.Close()
	if err := d.prepareCgroup(ctx, in); err != nil {
		return nil, err
	}
	secretsDir, err := d.writeSecretFiles(spec, id)
	if err != nil {
		return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrTransient, err)
	}

	run := in.run + 1
	token, announced := in.launchToken(hostPorts)
	attr := &syscall.ProcAttr{
		Dir:   spec.WorkingDir,
		Env:   withSecretsDir(append(workloadEnv(spec, id, hostPorts), EnvRunToken+"="+token), secretsDir),
		Files: []uintptr{d.null.Fd(), out.Fd(), out.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: id.cred},
	}
	prog, argv := in.prog, spec.Command
	if len(spec.Mounts) > 0 { // mounts.go
		if err := d.checkExternal(spec); err != nil {
			return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrInvalid, err)
		}
		if err := d.prepareVolumes(spec, id); err != nil {
			return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrTransient, err)
		}
		if prog, argv, err = d.mountLaunch(spec, prog, argv, id, attr.Sys); err != nil {
			return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrInvalid, err)
		}
	}
	// The launch is on disk before the spawn (DRV-4): announced by the
	// last record already (launch.go), else saved now.
	if !announced {
		if err := d.recordLaunch(in, token, hostPorts); err != nil {
			return nil, drivers.Wrap(DriverName, opStart, name, drivers.ErrTransient, fmt.Errorf("record the launch: %w", err))
		}
	}
	sp, err := d.r.spawn(prog, argv, attr, in.cg, true, d.onExit(in, run))
	if err != nil {
		if !announced {
			in.rec.Launching = false
			in.persist(in.snapshot())
		}
		return nil, drivers.Wrap(DriverName, opStart, name, spawnKind(err), err)
	}
	in.run, in.proc, in.runDone = run, sp.proc, make(chan struct{})
	d.logWritten(in) // the new run writes: check its file until it is quiet
	in.rec.Running, in.rec.Pid, in.rec.ProcStart, in.rec.Launching = true, sp.proc.pid, sp.procStart, false
	in.rec.StartedAt = d.nextStartedAt(in)
	in.rec.ExitCode, in.rec.Signal, in.rec.Reason = 0, "", ""
	if announced {
		in.rec.RunToken, in.rec.LaunchedAt, in.rec.HostPorts = token, in.rec.StartedAt, hostPorts
	}
	in.arm()
	// Recorded before Start returns: a daemon that dies now must find the
	// run on restart, or it would start a second one. So a run that cannot
	// be recorded is ended.
	if err := in.persist(in.snapshot()); err != nil {
		d.r.signalGroup(sp.proc, unix.SIGKILL)
		return in.runDone, drivers.Wrap(DriverName, opStart, name, drivers.ErrTransient, fmt.Errorf("record the run: %w", err))
	}
	return nil, nil
}

// nextStartedAt is now, nudged past the previous run's start so every run
// has its own StartedAt even on a coarse or fake clock.
func (d *Driver) nextStartedAt(in *instance) time.Time {
	now := d.clk.Now()
	if prev := in.lastExit.At; !now.After(prev) && !prev.IsZero() {
		now = prev.Add(time.Nanosecond)
	}
	return now
}

// spawnKind classifies a fork/exec failure: a problem with the spec is
// invalid, anything else (no memory, too many processes) transient.
func spawnKind(err error) error {
	for _, e := range []syscall.Errno{unix.ENOENT, unix.EACCES, unix.ENOEXEC, unix.ENOTDIR, unix.EPERM, unix.EISDIR, unix.ELOOP, unix.ENAMETOOLONG} {
		if errors.Is(err, e) {
			return drivers.ErrInvalid
		}
	}
	return drivers.ErrTransient
}

// onExit returns the handler for the end of run of in. It runs in the
// reaper goroutine: it records the exit and hands the watches to one
// goroutine, so a callback that calls back into the driver (Start, Stop)
// cannot stall exit handling for everyone else.
func (d *Driver) onExit(in *instance, run uint64) func(exitStatus) {
	return func(st exitStatus) {
		if !d.track() {
			// Closed: the next Driver on Dir will see the run ended.
			if st.prejoined {
				in.mu.Lock()
				cg := in.cg
				in.mu.Unlock()
				d.r.unjoin(cg)
			}
			return
		}
		in.mu.Lock()
		if in.run != run || in.proc == nil {
			if st.prejoined {
				d.r.unjoin(in.cg)
			}
			in.mu.Unlock()
			d.bg.Done()
			return
		}
		exit := drivers.Exit{Name: in.name, ExitCode: st.code, Signal: st.signal, At: d.clk.Now()}
		in.proc, in.lastExit, in.leftovers = nil, exit, in.leftovers || st.leftovers
		in.rec.Running, in.rec.Pid, in.rec.ProcStart, in.rec.StartedAt = false, 0, 0, time.Time{}
		in.rec.ExitCode, in.rec.Signal = st.code, st.signal
		close(in.runDone)
		ws := in.takeWatches()
		if d.restartAtOnce(in, run, st, exit, ws) { // restart.go
			return
		}
		exit.Reason = d.oomReason(in, st)
		in.lastExit.Reason, in.rec.Reason = exit.Reason, exit.Reason
		snap, v := in.snapshot()
		in.mu.Unlock()
		// The exit is written off the restart path. Should the daemon die
		// first, the stale "running" record fails the pid+start-time check
		// on restart and the run is seen as ended (exit code unknown).
		go func() {
			defer d.bg.Done()
			if err := in.persist(snap, v); err != nil {
				d.log.Error().Err(err).Str("instance", in.name).Msg("cannot record the exit")
			}
		}()
		if len(ws) > 0 {
			// Started last, so it runs first: the runtime runs the
			// goroutine started last next on this P.
			go fireAll(ws, exit)
		}
		d.log.Debug().Str("instance", in.name).Int("exit_code", st.code).Str("signal", st.signal).Msg("instance exited")
	}
}

// track counts one more piece of exit handling that Close must wait for;
// it reports false once the driver is closed.
func (d *Driver) track() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.bg.Add(1)
	return true
}

// takeWatches removes and returns the armed watches in registration
// order; in.mu must be held.
func (in *instance) takeWatches() []*drivers.OnceWatch {
	ids := slices.Sorted(maps.Keys(in.watches))
	ws := make([]*drivers.OnceWatch, 0, len(ids))
	for _, id := range ids {
		ws = append(ws, in.watches[id])
	}
	clear(in.watches)
	return ws
}

func fireAll(ws []*drivers.OnceWatch, e drivers.Exit) {
	for _, w := range ws {
		w.Fire(e)
	}
}

// Stop sends SIGTERM to the instance's process group and everything in
// its cgroup, waits up to grace for the run to end, then sends SIGKILL and
// waits for the exit; the cgroup is then emptied and removed (DRV-15).
// Stopping a stopped instance is a no-op (it removes a cgroup a crashed
// run left).
func (d *Driver) Stop(ctx context.Context, name string, grace time.Duration) error {
	in, err := d.lockLive(opStop, name)
	if err != nil {
		return err
	}
	in.disarmRestart()
	p, done, cg := in.proc, in.runDone, in.cg
	if p != nil {
		d.signalRun(p, cg, unix.SIGTERM)
	}
	in.mu.Unlock()
	if p == nil {
		return d.retire(ctx, opStop, in)
	}
	if grace > 0 {
		t := d.clk.NewTimer(grace)
		select {
		case <-done:
			t.Stop()
			return d.retire(ctx, opStop, in)
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return drivers.Wrap(DriverName, opStop, name, drivers.ErrTransient, ctx.Err())
		case <-d.done:
			t.Stop()
			return d.errorf(opStop, name, drivers.ErrInvalid, "driver closed")
		}
	}
	d.signalRun(p, cg, unix.SIGKILL)
	if err := d.waitRun(ctx, opStop, name, done); err != nil {
		return err
	}
	return d.retire(ctx, opStop, in)
}

// Kill sends SIGKILL to the instance's process group and cgroup, waits
// for the exit and removes the cgroup. Killing a stopped instance is a
// no-op.
func (d *Driver) Kill(ctx context.Context, name string) error {
	in, err := d.lockLive(opKill, name)
	if err != nil {
		return err
	}
	in.disarmRestart()
	p, done, cg := in.proc, in.runDone, in.cg
	if p != nil {
		d.signalRun(p, cg, unix.SIGKILL)
	}
	in.mu.Unlock()
	if p != nil {
		if err := d.waitRun(ctx, opKill, name, done); err != nil {
			return err
		}
	}
	return d.retire(ctx, opKill, in)
}

// signalRun signals a run's process group and main process, and every
// process of its cgroup (those that left the group too).
func (d *Driver) signalRun(p *proc, cg *cgroup.Group, sig unix.Signal) {
	d.r.signalGroup(p, sig)
	if cg != nil {
		cg.Signal(sig)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// retire removes in's cgroup after its run ended; a failure is transient.
func (d *Driver) retire(ctx context.Context, op string, in *instance) error {
	if err := d.retireCgroup(ctx, in); err != nil {
		return drivers.Wrap(DriverName, op, in.name, drivers.ErrTransient, err)
	}
	return nil
}

func (d *Driver) waitRun(ctx context.Context, op, name string, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return drivers.Wrap(DriverName, op, name, drivers.ErrTransient, ctx.Err())
	case <-d.done:
		return d.errorf(op, name, drivers.ErrInvalid, "driver closed")
	}
}

// Delete removes a stopped instance: its state and its logs. A running one
// is refused (ErrInvalid).
func (d *Driver) Delete(ctx context.Context, name string) error {
	in, err := d.lockLive(opDelete, name)
	if err != nil {
		return err
	}
	if in.proc != nil {
		in.mu.Unlock()
		return d.errorf(opDelete, name, drivers.ErrInvalid, "instance is running; stop it first")
	}
	in.disarmRestart()
	if ch := in.cgRetiring; in.cg != nil || ch != nil && !isClosed(ch) {
		in.mu.Unlock()
		if err := d.retire(ctx, opDelete, in); err != nil {
			return err
		}
		if ch != nil {
			select {
			case <-ch:
			case <-ctx.Done():
				return drivers.Wrap(DriverName, opDelete, name, drivers.ErrTransient, ctx.Err())
			}
		}
		return d.Delete(ctx, name)
	}
	if err := d.removeSecretFiles(name); err != nil {
		in.mu.Unlock()
		return drivers.Wrap(DriverName, opDelete, name, drivers.ErrTransient, err)
	}
	in.saveMu.Lock()
	err = os.RemoveAll(in.dir)
	in.gone = err == nil
	in.saveMu.Unlock()
	if err != nil {
		in.mu.Unlock()
		return drivers.Wrap(DriverName, opDelete, name, drivers.ErrTransient, err)
	}
	in.deleted = true
	d.opts.HostPorts.Release(picked(in.rec.Spec.Ports, in.rec.HostPorts)...)
	in.mu.Unlock()
	d.logForget(in)
	d.mu.Lock()
	if d.instances[name] == in {
		delete(d.instances, name)
		d.byService.Remove(name, in.rec.Spec.Labels)
	}
	d.mu.Unlock()
	return nil
}

// Inspect returns the instance's status.
func (d *Driver) Inspect(ctx context.Context, name string) (drivers.Status, error) {
	in, err := d.lockLive(opInspect, name)
	if err != nil {
		return drivers.Status{}, err
	}
	defer in.mu.Unlock()
	return in.status(), nil
}

// status reads in; in.mu must be held.
func (in *instance) status() drivers.Status {
	st := drivers.Status{
		Name:     in.name,
		State:    drivers.StateStopped,
		Labels:   maps.Clone(in.rec.Spec.Labels),
		ExitCode: in.rec.ExitCode,
	}
	if in.proc != nil {
		st.State = drivers.StateRunning
		st.StartedAt = in.rec.StartedAt
		st.Pid = in.rec.Pid
		st.Addresses = addresses(in.rec.HostPorts)
	}
	return st
}

// List returns the instances whose labels include selector, by name.
func (d *Driver) List(ctx context.Context, selector drivers.Labels) ([]drivers.Status, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, d.errorf(opList, "", drivers.ErrInvalid, "driver closed")
	}
	var all []*instance
	if names, ok := d.byService.Candidates(selector); ok {
		for name := range names {
			all = append(all, d.instances[name])
		}
	} else {
		all = make([]*instance, 0, len(d.instances))
		for _, in := range d.instances {
			all = append(all, in)
		}
	}
	d.mu.Unlock()
	var out []drivers.Status
	for _, in := range all {
		in.mu.Lock()
		if !in.deleted && in.rec.Spec.Labels.Match(selector) {
			out = append(out, in.status())
		}
		in.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Watch calls fn once when the current run ends. On an instance that is
// not running it calls fn soon, in its own goroutine, with the last exit.
// No call begins after stop returns.
func (d *Driver) Watch(name string, fn func(drivers.Exit)) (func(), error) {
	return d.watch(name, fn, nil)
}

// watch is Watch, authorizing a restart of the current run when p is set
// (WatchRestart, restart.go).
func (d *Driver) watch(name string, fn func(drivers.Exit), p *drivers.RestartPolicy) (func(), error) {
	in, err := d.lockLive(opWatch, name)
	if err != nil {
		return nil, err
	}
	defer in.mu.Unlock()
	w := drivers.NewOnceWatch(fn)
	if in.proc == nil {
		go w.Fire(in.lastExit)
		return w.Cancel, nil
	}
	d.mu.Lock()
	d.nextWatch++
	id := d.nextWatch
	d.mu.Unlock()
	in.watches[id] = w
	if p != nil {
		in.restart = &restartAuth{watch: id, policy: *p}
		in.proc.restartArmed.Store(true)
	}
	return func() {
		w.Cancel()
		in.mu.Lock()
		delete(in.watches, id)
		if in.restart != nil && in.restart.watch == id {
			in.restart = nil
			if in.proc != nil {
				in.proc.restartArmed.Store(false)
			}
		}
		in.mu.Unlock()
	}, nil
}

func cloneSpec(s drivers.Spec) drivers.Spec {
	s.Labels = maps.Clone(s.Labels)
	s.Env = maps.Clone(s.Env)
	s.SecretEnv = slices.Clone(s.SecretEnv)
	s.Command = slices.Clone(s.Command)
	s.Ports = slices.Clone(s.Ports)
	s.Mounts = slices.Clone(s.Mounts)
	s.Secrets = slices.Clone(s.Secrets)
	return s
}
