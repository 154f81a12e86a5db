package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/engenho/engenho/configs/daemonconfig"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/datadir"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/lifecycle"
	"github.com/engenho/engenho/runtime/logging"
	"github.com/engenho/engenho/runtime/metrics"
	"github.com/engenho/engenho/runtime/sdnotify"
	"github.com/rs/zerolog"
)

// Options start a daemon.
type Options struct {
	// ConfigPath is the daemon config file (DMN-1).
	ConfigPath string
	// DataDir overrides the config's data_dir when set.
	DataDir string
	// Bin is the engenho binary, for ${ENGENHO_BIN} in stack files.
	Bin string
	Log *logging.Logger
	// LogFormatFixed is set when --log-format chose Log's format: the
	// config's log.format is then left alone (DMN-17).
	LogFormatFixed bool
	// Clock is the wall clock unless a test gives another.
	Clock clock.Clock
	// Load reads and resolves the config file; LoadConfig when nil.
	Load func(path, dataDir string) (Settings, daemonconfig.Digest, error)
	// NoSignals leaves signal handling to the caller (tests).
	NoSignals bool
	// Hooks put fault injection in (the chaos build only); nil in the
	// shipped binary.
	Hooks *Hooks
}

// Snapshot is the daemon's published status; readers never wait on the
// loop (DMN-13).
type Snapshot struct {
	State       lifecycle.State       `json:"state"`
	Node        journal.Identity      `json:"node"`
	PreviousRun datadir.PreviousRun   `json:"previous_run"`
	Pid         int                   `json:"pid"`
	DataDir     string                `json:"data_dir"`
	Config      string                `json:"config"`
	StartedAt   time.Time             `json:"started_at"`
	Boots       []journal.BootAttempt `json:"boots,omitempty"`
}

// input is one event for the loop; reply, when set, gets the step's
// result. apply, when set, runs in the loop before the step: a boot phase
// hands over what it built that way, so only the loop touches d.parts.
type input struct {
	ev    lifecycle.Event
	reply chan result
	apply func()
}

type result struct {
	state  lifecycle.State
	err    error
	detail string
	// reload, when the step started a reload (ApplyConfig), gets its
	// outcome.
	reload <-chan reloadOutcome
	reinit *JournalReinit
}

// Daemon is one running engenho daemon.
type Daemon struct {
	opts  Options
	clk   clock.Clock
	log   *logging.Logger
	dir   *datadir.Dir
	in    chan input
	snap  atomic.Pointer[Snapshot]
	state lifecycle.State
	sd    *sdnotify.Notifier

	settings Settings
	cur      atomic.Pointer[Settings] // a copy of settings for other goroutines
	digest   daemonconfig.Digest      // of the config bytes the settings came from (DMN-16)
	boot     journal.BootAttempt
	rt       atomic.Pointer[runtime] // the running runtime; nil while down
	parts    *parts                  // what the boot phases built, owned by the loop
	watch    *configWatch
	reloadMu sync.Mutex // one reload (or boot's stack apply) at a time
	control  *control.Server
	ready    bool // READY=1 was sent
	metrics  *metrics.Metrics
	mem      *memEvents // the daemon's events while the journal is closed
}

// New prepares a daemon: it takes the data directory's lock at once, so a
// second daemon on the same directory fails here naming the holder (DMN-2).
func New(opts Options) (*Daemon, error) {
	if opts.Clock == nil && opts.Hooks != nil {
		opts.Clock = opts.Hooks.Clock
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if opts.Load == nil {
		chaosBuild := opts.Hooks != nil
		opts.Load = func(path, dataDir string) (Settings, daemonconfig.Digest, error) {
			return LoadConfig(path, dataDir, chaosBuild)
		}
	}
	if opts.Log == nil {
		opts.Log = logging.New(io.Discard, "json", zerolog.InfoLevel)
	}
	cleanInheritance(opts.Log)
	settings, dg, err := opts.Load(opts.ConfigPath, opts.DataDir)
	if err == nil && !opts.LogFormatFixed {
		opts.Log.SetFormat(settings.LogFormat)
	}
	if err != nil {
		// Without a config the data directory is the flag's, else the one
		// the file names (read on its own), else the default; the boot
		// reports the config's errors there (DMN-7).
		settings = DefaultSettings()
		settings.DataDir = daemonconfig.DataDirOf(opts.ConfigPath, daemonconfig.Overrides{DataDir: opts.DataDir})
	}
	dir, err := datadir.Open(settings.DataDir, opts.Clock)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", settings.DataDir, err)
	}
	if err := dir.Lock(); err != nil {
		return nil, err
	}
	sd, err := sdnotify.FromEnv()
	if err != nil {
		opts.Log.Warn().Err(err).Msg("sd_notify disabled")
		sd = sdnotify.New("", 0)
	}
	d := &Daemon{opts: opts, clk: opts.Clock, log: opts.Log, dir: dir, in: make(chan input, 64), sd: sd,
		settings: settings, mem: newMemEvents()}
	d.state = lifecycle.New(lifecycle.Config{DrainBudget: settings.DrainBudget})
	d.setSettings(settings, dg)
	prev, err := dir.PreviousRun()
	if err != nil {
		d.log.Warn().Err(err).Msg("reading the previous run marker")
	}
	d.snap.Store(&Snapshot{State: d.state, PreviousRun: prev, Pid: os.Getpid(), DataDir: settings.DataDir,
		Config: opts.ConfigPath, StartedAt: d.clk.Now(), Node: loadKeptIdentity(dir)})
	return d, nil
}

// setSettings changes the settings; only the loop (or New) calls it.
func (d *Daemon) setSettings(s Settings, dg daemonconfig.Digest) {
	d.settings, d.digest = s, dg
	c := s
	d.cur.Store(&c)
}

// settingsNow is the current settings, for goroutines other than the loop.
func (d *Daemon) settingsNow() Settings { return *d.cur.Load() }

// Snapshot returns the latest published status.
func (d *Daemon) Snapshot() Snapshot { return *d.snap.Load() }

// Dir is the daemon's data directory.
func (d *Daemon) Dir() *datadir.Dir { return d.dir }

// Run runs the daemon until it exits; it returns the exit code.
func (d *Daemon) Run(ctx context.Context) int {
	defer d.dir.Unlock()
	if err := d.startControl(); err != nil {
		d.log.Error().Err(err).Msg("control socket")
		return 1
	}
	defer d.stopControl()
	if err := d.startMetrics(); err != nil {
		d.log.Error().Err(err).Msg("metrics endpoint")
		return 1
	}
	defer d.stopMetrics()
	d.watch = newConfigWatch(d)
	defer d.watch.close()
	if every, ok := d.sd.WatchdogInterval(); ok {
		stop := d.watchdog(every)
		defer stop()
	}
	if !d.opts.NoSignals {
		stop := d.handleSignals()
		defer stop()
	}
	first := lifecycle.Event(lifecycle.BootRequested{})
	if hold, err := d.dir.HoldPresent(); err != nil {
		d.log.Error().Err(err).Msg("reading the hold marker")
	} else if hold {
		first = lifecycle.HoldPresent{}
	}
	d.post(first)
	for {
		select {
		case <-ctx.Done():
			d.post(lifecycle.ExitRequested{Source: "context"})
			ctx = context.Background()
		case in := <-d.in:
			if code, done := d.step(in); done {
				return code
			}
		}
	}
}

// post queues an internal event.
func (d *Daemon) post(ev lifecycle.Event) {
	d.in <- input{ev: ev}
}

// command queues an operator's event and waits for the lifecycle's answer.
func (d *Daemon) command(ctx context.Context, ev lifecycle.Event) (result, error) {
	reply := make(chan result, 1)
	select {
	case d.in <- input{ev: ev, reply: reply}:
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	select {
	case r := <-reply:
		return r, r.err
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
}

// step feeds one event to the lifecycle and performs its effect.
func (d *Daemon) step(in input) (int, bool) {
	if in.apply != nil {
		in.apply()
	}
	if in.ev == nil {
		return 0, false
	}
	next, fx := lifecycle.Step(d.state, in.ev)
	if r := lifecycle.Refusal(d.state, in.ev, fx); r != nil {
		d.log.Debug().Err(r).Msg("refused")
		if in.reply != nil {
			in.reply <- result{state: d.state, err: r}
		}
		return 0, false
	}
	prev := d.state
	d.state = next
	d.publish(prev)
	if err := d.dir.SyncHold(next.Hold); err != nil {
		d.log.Error().Err(err).Msg("hold marker")
	}
	res := result{state: next}
	code, done := 0, false
	for _, eff := range fx {
		if c, end := d.perform(eff, &res); end {
			code, done = c, true
		}
	}
	if in.reply != nil {
		in.reply <- res
	}
	return code, done
}

func (d *Daemon) publish(prev lifecycle.State) {
	s := *d.snap.Load()
	s.State = d.state
	d.snap.Store(&s)
	if !d.ready && (d.state.Name == lifecycle.Stopped || d.state.Name == lifecycle.Failed) {
		// A daemon held stopped or failed at boot still tells systemd it is
		// up, or systemd would kill it at TimeoutStartSec (DMN-18).
		d.ready = true
		d.sd.Ready()
	}
	if prev.Name != d.state.Name || prev.Phase != d.state.Phase {
		d.log.Info().Str("state", string(d.state.Name)).Str("phase", string(d.state.Phase)).Msg("lifecycle")
		d.sd.Status(d.state.String())
		if d.state.Name != lifecycle.Booting {
			d.emit(messages.KindDaemonState, messages.LevelInfo, "daemon "+d.state.String())
		}
	}
}

// perform carries out one of the lifecycle's effects; its result comes
// back as an event.
func (d *Daemon) perform(eff step.Effect, res *result) (int, bool) {
	switch e := eff.(type) {
	case lifecycle.RunPhase:
		go d.runPhase(e)
	case lifecycle.AnnounceRunning:
		d.announceRunning(e)
	case lifecycle.ApplyConfig:
		reply := make(chan reloadOutcome, 1)
		res.reload = reply
		go d.reconfigure(reply)
	case lifecycle.StartDrain:
		if d.state.Then == lifecycle.TargetExit {
			d.sd.Stopping()
		}
		go d.drain(e.Budget)
	case lifecycle.ReleaseJournal:
		go d.release()
	case lifecycle.ScheduleRetry:
		attempt := e.Attempt
		d.clk.AfterFunc(e.Delay, func() { d.post(lifecycle.BackoffElapsed{Attempt: attempt}) })
	case lifecycle.MoveToAttic:
		dest, r, err := d.moveToAttic(e.What)
		res.detail, res.reinit, res.err = dest, r, err
		if err == nil {
			d.log.Warn().Str("what", e.What).Str("to", dest).Msg("moved to the attic")
			what := e.What
			go d.post(lifecycle.ReinitDone{What: what}) // failed boots again on it
		}
	case lifecycle.Exit:
		d.log.Info().Int("code", e.Code).Msg("exiting")
		return e.Code, true
	}
	return 0, false
}

// watchdog pings systemd while the loop answers (DMN-18): the ping goes
// through the loop, so a wedged loop stops the pings.
func (d *Daemon) watchdog(every time.Duration) func() {
	done := make(chan struct{})
	go func() {
		for {
			t := d.clk.NewTimer(every)
			select {
			case <-t.C():
				d.in <- input{apply: func() { d.sd.Watchdog() }}
			case <-done:
				t.Stop()
				return
			}
		}
	}()
	return func() { close(done) }
}

func (d *Daemon) handleSignals() func() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-ch:
				if ev, ok := lifecycle.FromSignal(sig); ok {
					d.log.Info().Str("signal", sig.String()).Msg("signal")
					d.post(ev)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// emit records a daemon event in the journal when it is open, else in
// memory until it is, and logs it.
func (d *Daemon) emit(kind string, level messages.Level, msg string) {
	ev := messages.Event{UnixMs: d.clk.Now().UnixMilli(), Level: level, Kind: kind, Actor: "daemon", Message: msg}
	if p := d.parts; p != nil && p.journal != nil {
		p.sink.Emit(ev)
		return
	}
	d.mem.add(ev)
	lvl := zerolog.InfoLevel
	switch level {
	case messages.LevelWarn:
		lvl = zerolog.WarnLevel
	case messages.LevelError:
		lvl = zerolog.ErrorLevel
	}
	d.log.WithLevel(lvl).Str("kind", kind).Msg(msg)
}
