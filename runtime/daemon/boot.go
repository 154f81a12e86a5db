package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/activator"
	"github.com/engenho/engenho/actors/root"
	"github.com/engenho/engenho/actors/service"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/configs/daemonconfig"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/incus"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/ports"
	"github.com/engenho/engenho/drivers/process"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/balancer"
	"github.com/engenho/engenho/runtime/config"
	"github.com/engenho/engenho/runtime/edge"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/lifecycle"
	"github.com/engenho/engenho/runtime/metrics"
	"github.com/engenho/engenho/runtime/nodekey"
	"github.com/engenho/engenho/runtime/usage"
)

// parts is what the boot phases have built so far; the drain and the
// release take it down again.
type parts struct {
	journal  *journal.Journal
	sink     eventSink
	drivers  map[string]drivers.Driver
	closers  []func() error
	deployer *Deployer
	desired  []messages.ApplyStack
	removing []string
	store    objstore.Store
	prefix   string
	// hostPorts hands out every new instance's host ports (SVC-24): the
	// service actors take from it, and so does the process driver for a
	// spec port without one. Made at each boot over ports.instance_range.
	hostPorts *ports.Allocator
	rt        *runtime
}

// runtime is the running supervision tree and what serves it.
type runtime struct {
	engine   *actor.Engine
	sys      *supervise.System
	root     *actor.PID
	board    *supervise.Board
	balancer *balancer.Balancer
	deployer *Deployer
	journal  *journal.Journal
	drivers  map[string]drivers.Driver
	exited   chan messages.ChildExited
	draining chan struct{}
	routes   *edge.Table
	edge     *edge.Edge
	// usage samples every running replica's usage (DRV-16); nil when
	// usage.interval is 0.
	usage *usage.Sampler
	// secrets re-reads the secret files and rotates them (secretwatch.go).
	secrets *secretWatch
}

// runPhase runs one boot phase in its own goroutine and posts the outcome.
func (d *Daemon) runPhase(e lifecycle.RunPhase) {
	start := d.clk.Now()
	apply, err := d.phase(e.Phase)
	took := d.clk.Since(start)
	ev := lifecycle.Event(lifecycle.PhaseDone{Phase: e.Phase})
	if err != nil {
		ev = lifecycle.PhaseFailed{Phase: e.Phase, Class: classify(err), Reason: err.Error()}
		d.log.Error().Err(err).Str("phase", string(e.Phase)).Msg("boot phase failed")
	}
	d.in <- input{ev: ev, apply: func() {
		d.recordPhase(e, took, err)
		if apply != nil && err == nil {
			apply()
		}
	}}
}

// configError marks a failure that no retry without a change can fix.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

func classify(err error) lifecycle.CauseClass {
	var ce configError
	var jd journalDamage
	switch {
	case errors.As(err, &jd):
		return lifecycle.CauseCorrupt
	case errors.As(err, &ce):
		return lifecycle.CauseConfig
	}
	return lifecycle.CauseTransient
}

func (d *Daemon) phase(p lifecycle.Phase) (func(), error) {
	switch p {
	case lifecycle.PhaseResolveConfig:
		return d.resolveConfig()
	case lifecycle.PhaseOpenJournal:
		return d.openJournal()
	case lifecycle.PhaseAdopt:
		return d.prepareDrivers()
	case lifecycle.PhaseStartTree:
		return d.startTree()
	case lifecycle.PhaseListen:
		return d.listen()
	}
	return nil, fmt.Errorf("unknown phase %s", p)
}

func (d *Daemon) recordPhase(e lifecycle.RunPhase, took time.Duration, err error) {
	if e.Phase == lifecycle.PhaseResolveConfig {
		d.boot = journal.BootAttempt{StartedAt: d.clk.Now().Add(-took), Outcome: journal.BootRunning}
	}
	ph := journal.Phase{Name: string(e.Phase), Duration: took}
	if err != nil {
		ph.Error = err.Error()
		d.boot.Outcome, d.boot.Error, d.boot.EndedAt = journal.BootFailed, err.Error(), d.clk.Now()
		d.saveBoot()
		kind := messages.KindDaemonBootFailed
		if classify(err) == lifecycle.CauseCorrupt {
			kind = messages.KindJournalDamaged
		}
		d.emit(kind, messages.LevelError, fmt.Sprintf("boot attempt %d failed in %s: %v", e.Attempt, e.Phase, err))
	}
	d.boot.Phases = append(d.boot.Phases, ph)
}

// saveBoot keeps the boot attempt in the boot journal (DMN-7) when the
// journal is open.
func (d *Daemon) saveBoot() {
	if d.parts == nil || d.parts.journal == nil {
		return
	}
	rec, err := d.parts.journal.RecordBoot(d.boot)
	if err != nil {
		d.log.Warn().Err(err).Msg("recording the boot attempt")
		return
	}
	d.boot = rec
}

// resolveConfig reads the config file again: a boot always runs on what
// the file says now (DMN-16).
func (d *Daemon) resolveConfig() (func(), error) {
	s, dg, err := d.opts.Load(d.opts.ConfigPath, d.opts.DataDir)
	if err != nil {
		// A truncate event can make a reader see an empty file: if the file
		// changed since it was read, read it once more (DMN-16).
		<-d.clk.NewTimer(config.DefaultDebounce).C()
		if changed, _ := daemonconfig.Changed(d.opts.ConfigPath, dg); changed {
			s, dg, err = d.opts.Load(d.opts.ConfigPath, d.opts.DataDir)
		}
	}
	if err != nil {
		return nil, configError{err}
	}
	if filepath.Clean(s.DataDir) != filepath.Clean(d.dir.Root()) {
		return nil, configError{fmt.Errorf("data_dir changed from %s to %s: restart the daemon to move it", d.dir.Root(), s.DataDir)}
	}
	return func() {
		d.setSettings(s, dg)
		d.log.SetLevel(s.LogLevel)
		d.parts = &parts{}
	}, nil
}

// prepareDrivers makes the drivers ready and reads the desired state, so
// the tree can adopt what runs (DMN-9).
func (d *Daemon) prepareDrivers() (func(), error) {
	s := d.settings
	drvs := map[string]drivers.Driver{}
	hostPorts := ports.New(s.InstanceRange, nil)
	var closers []func() error
	fail := func(err error) (func(), error) {
		for _, c := range closers {
			_ = c()
		}
		return nil, err
	}
	key, err := nodekey.LoadOrCreate(d.dir.NodeKeyPath())
	if err != nil {
		err = fmt.Errorf("%w (secret env values in the journal and the instances' state files are sealed with it)", err)
		if errors.Is(err, nodekey.ErrDamaged) || errors.Is(err, nodekey.ErrExposed) {
			// Damaged state holds (REL-5): a retry on a timer cannot fix it.
			err = journalDamage{err: err, hint: fmt.Sprintf("put back %s from a backup of the data directory (mode 0600), then run `engenho retry`", d.dir.NodeKeyPath())}
		}
		return fail(err)
	}
	if s.Process.Enabled {
		if err := process.BecomeSubreaper(); err != nil {
			d.log.Warn().Err(err).Msg("cannot become child subreaper; orphaned grandchildren will go to init")
		}
		p, err := process.New(process.Options{Dir: d.dir.Root(), Clock: d.clk, Logger: d.log.With().Str("driver", "process").Logger(),
			LogMaxBytes: s.Process.LogMaxBytes, LogFiles: s.Process.LogFiles, Sealer: key, CgroupRoot: s.Process.CgroupRoot,
			HostPorts: hostPorts})
		if err != nil {
			return fail(fmt.Errorf("process driver: %w", err))
		}
		drvs[p.Name()] = d.wrapDriver(s, p)
		closers = append(closers, p.Close)
	}
	if s.Incus.Enabled {
		l := d.log.With().Str("driver", "incus").Logger()
		in, err := incus.New(incus.Options{Socket: s.Incus.Socket, Project: s.Incus.Project, RemoteURL: s.Incus.RemoteURL,
			ClientCert: s.Incus.ClientCert, ClientKey: s.Incus.ClientKey, ServerCA: s.Incus.ServerCA, Clock: d.clk, Logger: &l, Sealer: key})
		if err != nil {
			return fail(fmt.Errorf("incus driver: %w", err))
		}
		drvs[in.Name()] = d.wrapDriver(s, in)
		closers = append(closers, in.Close)
	}
	store, prefix, closeStore, err := d.openStore(s)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, closeStore)
	j := d.parts.journal
	dep := NewDeployer(j, &node{d: d, drivers: drvs, journal: j, key: key}, key)
	m := d.metrics
	dep.observe = func(took time.Duration) { m.ObserveJournalWrite(metrics.JournalIntent, took) }
	dep.now, dep.announce, dep.actors = d.clk.Now, d.parts.sink.Record, d.parts.sink.actors
	desired, removing, err := dep.Desired()
	if err != nil {
		err = fmt.Errorf("reading the desired state: %w", err)
		if errors.Is(err, nodekey.ErrWrongKey) {
			// A lost key holds like a damaged journal (REL-5): no retry on a
			// timer brings the key back.
			err = journalDamage{err: err, hint: fmt.Sprintf("the journal's secret env values were sealed with another node key: put back %s from a backup of the data directory and run `engenho retry`, or run `engenho reinit journal` and apply the stack files again", d.dir.NodeKeyPath())}
		}
		return fail(err)
	}
	return func() {
		d.parts.drivers, d.parts.closers = drvs, closers
		d.parts.deployer, d.parts.desired, d.parts.removing = dep, desired, removing
		d.parts.store, d.parts.prefix = store, prefix
		d.parts.hostPorts = hostPorts
	}, nil
}

// startTree starts the supervision tree on the desired state; the service
// actors adopt what the drivers have running (SUP-9).
func (d *Daemon) startTree() (func(), error) {
	p, s := d.parts, d.settings
	engine, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		return nil, fmt.Errorf("actor engine: %w", err)
	}
	strategy, err := supervise.ParseStrategy(s.Strategy)
	if err != nil {
		return nil, configError{err}
	}
	rt := &runtime{engine: engine, board: supervise.NewBoard(), deployer: p.deployer, journal: p.journal, drivers: p.drivers,
		exited: make(chan messages.ChildExited, 1), draining: make(chan struct{})}
	rt.balancer = balancer.New(balancer.Options{Clock: d.clk, Logger: d.log.With().Str("part", "balancer").Logger()})
	rt.sys = supervise.NewSystem(engine, d.clk, d.log.Logger)
	rt.sys.AllowInjectPanic = d.allowInjectPanic(s)
	rt.sys.Ladder = s.Ladder
	rt.sys.OnRootExit = func(m messages.ChildExited) { rt.rootExited(d, m) }
	env := service.Env{
		Driver: func(name string) (drivers.Driver, bool) {
			drv, ok := p.drivers[name]
			return drv, ok
		},
		Ports: balancerPorts{rt.balancer}, HostPorts: p.hostPorts, Events: d.quietEvents(p.journal, p.sink), Board: rt.board, Store: journalStore{p.journal},
		Retirements: journalRetirements{p.journal},
		Bin:         d.opts.Bin, StepTimeout: s.StepTimeout, Sweep: s.Sweep, OutputLines: 20,
	}
	rt.sys.OnRestart = func(dec supervise.Decision) { env.Events.Emit(supervise.RestartEvent(dec, d.clk.Now())) }
	rt.routes = edge.NewTable()
	for _, m := range p.desired {
		rt.routes.SetStack(m.Current.Definition)
	}
	opts := root.Options{
		Supervise:   supervise.Options{Strategy: strategy, Intensity: supervise.Intensity{MaxRestarts: s.MaxRestarts, Period: s.Period}, Ladder: s.Ladder},
		OnStackGone: func(stack string) { d.forgetStack(p.deployer, stack); p.deployer.stackGone(stack, rt.drivers) },
		Removing:    p.removing,
		Extra:       []supervise.ChildSpec{activator.Spec(d.activatorEnv(p, rt, env))},
	}
	rt.root = rt.sys.SpawnRoot(supervise.ChildSpec{Name: root.Name, Produce: root.Produce(env, opts, p.desired)})
	if s.UsageInterval > 0 {
		rt.usage = usage.New(usage.Options{Clock: d.clk, Interval: s.UsageInterval, Services: func() []messages.ServiceStatus { return rt.board.Services("") },
			Driver: env.Driver, Log: d.log.With().Str("part", "usage").Logger()})
		rt.usage.Start()
	}
	rt.secrets = newSecretWatch(d, rt)
	p.deployer.OnChange(rt.secrets.poke)
	rt.secrets.start()
	p.deployer.Attach(func(msg any) {
		switch m := msg.(type) {
		case messages.ApplyStack:
			rt.routes.SetStack(m.Current.Definition)
		case messages.RemoveStack:
			rt.routes.RemoveStack(m.Stack)
		}
		engine.Send(rt.root, msg)
	})
	return func() {
		p.rt = rt
		d.rt.Store(rt)
	}, nil
}

func (d *Daemon) forgetStack(dep *Deployer, stack string) {
	if err := dep.Forget(stack); err != nil {
		d.log.Error().Err(err).Str("stack", stack).Msg("forgetting a removed stack")
	}
}

// rootExited is called once when the root ends: at the end of a drain, or
// because it gave up (SUP-8).
func (rt *runtime) rootExited(d *Daemon, m messages.ChildExited) {
	rt.exited <- m
	select {
	case <-rt.draining:
	default:
		d.post(lifecycle.RootGaveUp{Chain: append([]string{fmt.Sprintf("root ended: %s %s", m.Reason, m.Err)}, m.Chain...)})
	}
}

// listen opens the HTTP edge when edge.listen is set (ACT-1).
func (d *Daemon) listen() (func(), error) {
	addr, rt := d.settings.EdgeListen, d.parts.rt
	if addr == "" {
		return nil, nil
	}
	l, err := edge.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	e := edge.New(edge.Options{Table: rt.routes, Board: rt.board, Clock: d.clk, Log: d.log.With().Str("part", "edge").Logger()})
	go func() { _ = e.Serve(l) }()
	d.log.Info().Str("listen", addr).Msg("edge listening")
	return func() { rt.edge = e }, nil
}

// announceRunning: the runtime runs (DMN-8, DMN-18).
func (d *Daemon) announceRunning(e lifecycle.AnnounceRunning) {
	d.boot.Outcome, d.boot.EndedAt = journal.BootSucceeded, d.clk.Now()
	d.saveBoot()
	if err := d.dir.MarkLive("running"); err != nil {
		d.log.Error().Err(err).Msg("run marker")
	}
	d.ready = true
	d.sd.Ready()
	d.emit(messages.KindDaemonBooted, messages.LevelInfo, fmt.Sprintf("running (epoch %d)", e.Epoch))
	go d.applyConfigStacks()
	if e.Reload {
		go d.reconfigure(nil)
	}
}

// applyConfigStacks applies the stack files the config lists once the
// runtime runs. A file that does not parse or validate is refused with a
// config.rejected event and its stack keeps its last good definition; the
// rest apply (DMN-15). A reload is stricter: all or nothing (reconfigure).
func (d *Daemon) applyConfigStacks() {
	rt := d.rt.Load()
	if rt == nil {
		return
	}
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	paths := d.settingsNow().StackFiles
	stacks, errs := checkStackFiles(rt, paths)
	for _, e := range errs {
		d.log.Error().Str("error", e).Msg("stack file refused")
		d.postEmit(messages.KindConfigRejected, messages.LevelError, "stack file refused, its stack keeps its last good definition: "+oneLine(e))
	}
	d.applyStacks(rt, stacks, paths)
}

// postEmit emits an event from a goroutine other than the loop.
func (d *Daemon) postEmit(kind string, level messages.Level, msg string) {
	d.in <- input{apply: func() { d.emit(kind, level, msg) }}
}

// drain stops the tree in reverse order within budget (DMN-8). Workloads
// keep running: an actor stop is not a workload stop; the next boot adopts
// them (DMN-9).
func (d *Daemon) drain(budget time.Duration) {
	rt := d.rt.Load()
	if rt == nil {
		d.post(lifecycle.DrainDone{})
		return
	}
	close(rt.draining)
	if rt.usage != nil {
		rt.usage.Stop()
	}
	if rt.secrets != nil {
		rt.deployer.OnChange(nil)
		rt.secrets.stop()
	}
	rt.deployer.Attach(nil)
	rt.engine.Send(rt.root, messages.Shutdown{})
	t := d.clk.NewTimer(budget)
	defer t.Stop()
	select {
	case <-rt.exited:
	case <-t.C():
		d.post(lifecycle.DrainFailed{Reason: fmt.Sprintf("the tree did not stop within %s", budget)})
		return
	}
	rt.balancer.Shutdown()
	if rt.edge != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = rt.edge.Shutdown(ctx)
		cancel()
	}
	d.in <- input{ev: lifecycle.DrainDone{}, apply: func() { d.rt.Store(nil) }}
}

// release closes what the boot opened, the journal last, and marks the
// run released (DMN-3).
func (d *Daemon) release() {
	p := d.parts
	var errs []error
	if p != nil {
		for _, c := range p.closers {
			errs = append(errs, c())
		}
		if p.journal != nil {
			errs = append(errs, p.journal.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		d.post(lifecycle.JournalReleaseFailed{Reason: err.Error()})
		return
	}
	if err := d.dir.MarkReleased(); err != nil {
		d.post(lifecycle.JournalReleaseFailed{Reason: err.Error()})
		return
	}
	d.in <- input{ev: lifecycle.JournalReleased{}, apply: func() { d.parts = nil }}
}
