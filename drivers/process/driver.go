package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/cgroup"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/ports"
)

// DriverName is the process driver's config name.
const DriverName = "process"

// Defaults for Options.
const (
	DefaultLogMaxBytes = 10 << 20
	DefaultLogFiles    = 3
)

// rotateEvery is how often a log file being written is checked for
// rotation (logwatch.go: a quiet one is left to inotify).
const rotateEvery = time.Second

// Options configure a process driver.
type Options struct {
	// Dir holds the driver's state: DIR/instances/NAME/{state.json,
	// output.log*}. Required. One Driver at a time may use a Dir.
	Dir string
	// Clock stamps StartedAt and drives Stop's grace, log rotation checks
	// and Logs follow polling; default the wall clock.
	Clock  clock.Clock
	Logger zerolog.Logger
	// LogMaxBytes is the size at which an instance's output file is
	// rotated (default 10 MiB).
	LogMaxBytes int64
	// LogFiles is how many rotated files are kept besides the current one
	// (default 3).
	LogFiles int
	// Sealer keeps the values of a spec's SecretEnv sealed in its state
	// file (SEC-2). Without one, a spec with secret values is refused.
	Sealer drivers.Sealer
	// Cgroups is where each instance gets its cgroup (DRV-12); nil
	// detects the host's with CgroupRoot. Where none can be used,
	// instances run without one and limits are refused (DRV-17).
	Cgroups *cgroup.Host
	// CgroupRoot is the subtree below each cgroup hierarchy that the
	// instances' groups go in (default "engenho"), when Cgroups is nil.
	CgroupRoot string
	// NoCgroups runs every instance without a cgroup (benchmarks compare
	// with it); limits are then refused.
	NoCgroups bool
	// SecretsDir is where instances' secret files go, one directory per
	// instance (secretfiles.go); it must be on a memory file system.
	// Default: /run/engenho-secrets/ID, else /dev/shm/engenho-secrets/ID,
	// the first on tmpfs, ID a hash of Dir.
	SecretsDir string
	// HostPorts picks the host port of a spec port whose HostPort is 0
	// (SVC-24): the daemon passes the node's drivers/ports.Allocator, the
	// one its service actors take from. Default: the kernel's pick
	// (ports.Kernel).
	HostPorts HostPorts
}

// HostPorts hands out host ports: Take one for a run, Release those of a
// run that is over.
type HostPorts interface {
	Take() (int, error)
	Release(ports ...int)
}

// Driver runs instances as local processes.
type Driver struct {
	opts Options
	clk  clock.Clock
	log  zerolog.Logger
	r    *reaper
	lock *os.File // flock on DIR/lock
	null *os.File // /dev/null, every child's stdin
	done chan struct{}
	bg   sync.WaitGroup // exit handling in progress; Close waits for it

	mu        sync.Mutex
	instances map[string]*instance
	byService drivers.ServiceIndex // names by stack and service, for List
	closed    bool
	nextWatch uint64

	// Log rotation checks (logwatch.go), under logMu: the hot files with
	// the size last seen, the quiet ones with their inotify watch, and the
	// tick, armed while a file is hot.
	logMu    sync.Mutex
	logHot   map[*instance]int64
	logWds   map[*instance]int32
	logStop  bool
	logPolls bool // said once that some file is polled
	rotation clock.Timer
	rotating sync.WaitGroup
	// runs maps run tokens to live runs while New loads (see findRun).
	runs map[string]tokenRun
	// cg is the cgroup host, nil when instances run without; cgErr says
	// why.
	cg    *cgroup.Host
	cgErr error
	// secretsDir holds the instances' secret files; secretsErr says why
	// there is none (no memory file system).
	secretsDir string
	secretsErr error
	// secretsChain are the directories from the first the driver makes
	// down to secretsDir (ensureSecretsChain).
	secretsChain []string
}

// instance is one workload. mu serialises its lifecycle; it is never held
// while waiting for a process.
type instance struct {
	mu       sync.Mutex
	name     string
	dir      string
	rec      *record
	logs     *logSet
	proc     *proc // the current run; nil when stopped
	run      uint64
	runDone  chan struct{} // closed when the current run ends
	lastExit drivers.Exit
	watches  map[uint64]*drivers.OnceWatch
	// restart is the restart the current run's end may have at once, as
	// a watch authorized it (restart.go); pendingRestart is the run whose
	// end is having it, until the restart is made or given up.
	restart        *restartAuth
	pendingRestart uint64
	deleted        bool
	prog           string // resolved command, re-resolved when it stops being executable
	version        uint64 // of rec, bumped at every change
	// secretsLost: the state file's sealed env values did not open (the
	// node key changed); the instance must not start without them.
	secretsLost error
	// cg is the instance's cgroup while it has one (from a Start to the
	// Stop, Kill or Delete that removes it); leftovers: the last run left
	// processes in it, killed but perhaps not gone; cgRetiring is closed
	// once a removal under way is done.
	cg         *cgroup.Group
	leftovers  bool
	cgRetiring chan struct{}

	saveMu sync.Mutex
	saved  atomic.Uint64 // version on disk; written under saveMu
	gone   bool          // the directory was removed
	// armedAt is the version of rec that first held its NextToken: once
	// saved has reached it, the next launch is announced on disk.
	armedAt uint64
}

// New opens (or creates) Dir and adopts the instances whose processes are
// still running: those whose pid and /proc start time both match their
// state file (DRV-4). It returns an error when another Driver holds Dir.
func New(opts Options) (*Driver, error) {
	if opts.Dir == "" {
		return nil, errors.New("process driver: Options.Dir is empty")
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if opts.HostPorts == nil {
		opts.HostPorts = ports.Kernel{}
	}
	if opts.LogMaxBytes <= 0 {
		opts.LogMaxBytes = DefaultLogMaxBytes
	}
	if opts.LogFiles <= 0 {
		opts.LogFiles = DefaultLogFiles
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "instances"), 0o700); err != nil {
		return nil, fmt.Errorf("process driver: %w", err)
	}
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("process driver: %w", err)
	}
	d := &Driver{
		opts:      opts,
		clk:       opts.Clock,
		log:       opts.Logger.With().Str("driver", DriverName).Logger(),
		r:         theReaper,
		lock:      lock,
		null:      null,
		done:      make(chan struct{}),
		instances: make(map[string]*instance),
		byService: drivers.ServiceIndex{},
		logHot:    make(map[*instance]int64),
		logWds:    make(map[*instance]int32),
	}
	d.openCgroups()
	d.pickSecretsDir()
	if err := d.r.acquire(); err != nil {
		lock.Close()
		null.Close()
		return nil, fmt.Errorf("process driver: reaper: %w", err)
	}
	theLogWatcher.acquire()
	if err := d.load(); err != nil {
		d.Close()
		return nil, err
	}
	// Adopted runs may be writing: each file is checked until it is quiet.
	d.mu.Lock()
	for _, in := range d.instances {
		d.logWritten(in)
	}
	d.mu.Unlock()
	return d, nil
}

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("process driver: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("process driver: %s is in use by another driver: %w", dir, err)
	}
	return f, nil
}

// load reads every instance directory and adopts running processes.
func (d *Driver) load() error {
	root := filepath.Join(d.opts.Dir, "instances")
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("process driver: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || drivers.CheckName(name) != nil {
			d.log.Warn().Str("entry", name).Msg("ignoring unexpected entry in instances dir")
			continue
		}
		in, err := d.loadInstance(filepath.Join(root, name), name)
		if errors.Is(err, errClosed) {
			return err
		}
		var damaged *damagedRecord
		if errors.As(err, &damaged) {
			d.quarantine(filepath.Join(root, name), name, err)
			continue
		}
		if err != nil {
			d.log.Error().Err(err).Str("instance", name).Msg("cannot load instance; left untouched")
			continue
		}
		d.instances[name] = in
		d.byService.Add(name, in.rec.Spec.Labels)
	}
	d.runs = nil
	return nil
}

// recordedStart is the /proc start time of in's recorded run. A run
// started while the daemon had no file descriptor left to read /proc with
// was recorded with none (0): its run token, in the process's environment,
// tells whether the recorded pid is still that run, and gives its start.
func (d *Driver) recordedStart(in *instance) uint64 {
	rec := in.rec
	if rec.ProcStart != 0 || rec.Pid == 0 {
		return rec.ProcStart
	}
	if run := d.findRunOf(in, rec.RunToken); run.pid == rec.Pid && run.start != 0 {
		rec.ProcStart = run.start
	}
	return rec.ProcStart
}

func (d *Driver) loadInstance(dir, name string) (*instance, error) {
	rec, err := loadRecord(dir)
	if err != nil {
		return nil, err
	}
	if rec.Spec.Name != name {
		return nil, &damagedRecord{path: filepath.Join(dir, stateFile), reason: fmt.Sprintf("it names instance %q", rec.Spec.Name)}
	}
	in := d.newInstance(dir, rec)
	d.findCgroup(in)
	if err := d.openSecrets(rec); err != nil {
		// The run is still adopted and can be stopped and deleted; only a
		// new start needs the values.
		in.secretsLost = err
		d.log.Error().Err(err).Str("instance", name).Msg("cannot open the instance's secret env values; it cannot be started again, only replaced")
	}
	if !rec.Running && rec.Launching {
		adopted, err := d.adoptLaunch(in)
		if err != nil {
			return nil, err
		}
		if adopted {
			d.log.Info().Str("instance", name).Int("pid", rec.Pid).Msg("adopted a run whose start the last daemon did not live to record")
		}
		return in, nil
	}
	if !rec.Running {
		return in, d.loadArmed(in)
	}
	ok, err := d.attach(in, rec.Pid, d.recordedStart(in))
	if err != nil {
		return nil, err
	}
	if ok {
		d.log.Info().Str("instance", name).Int("pid", rec.Pid).Msg("adopted running instance")
		return in, nil
	}
	// Gone, or the pid now belongs to another process: the run ended while
	// no driver watched it, with an exit code nobody saw.
	d.log.Info().Str("instance", name).Int("pid", rec.Pid).Msg("instance process is gone; not adopted")
	oldPid, oldToken := rec.Pid, rec.RunToken
	if adopted, err := d.adoptArmed(in); err != nil || adopted {
		if adopted {
			// The last daemon saw that run end and restarted it: what the
			// ended run left was killed then. Only its own group is
			// looked at; the cgroup now holds the adopted run.
			d.killLeftovers(name, oldPid, oldToken)
			d.log.Info().Str("instance", name).Int("pid", rec.Pid).Msg("adopted a restart the last daemon did not live to record")
		}
		return in, err
	}
	d.killLeftovers(name, rec.Pid, rec.RunToken)
	if in.cg != nil {
		// Everything the run left, also outside its process group.
		if n, _ := in.cg.Signal(unix.SIGKILL); n > 0 {
			in.leftovers = true
			d.log.Info().Str("instance", name).Int("processes", n).Str("cgroup", in.cg.Rel()).Msg("killed what the ended run left in its cgroup")
		}
	}
	rec.Running, rec.Pid, rec.ProcStart, rec.StartedAt, rec.ExitCode, rec.Signal = false, 0, 0, time.Time{}, -1, ""
	in.lastExit = drivers.Exit{Name: name, ExitCode: -1}
	if err := rec.save(dir); err != nil {
		d.log.Error().Err(err).Str("instance", name).Msg("cannot record the lost run")
	}
	return in, nil
}

// loadArmed adopts the restart a stopped record announces, if it ran
// (adoptArmed).
func (d *Driver) loadArmed(in *instance) error {
	adopted, err := d.adoptArmed(in)
	if adopted {
		d.log.Info().Str("instance", in.name).Int("pid", in.rec.Pid).Msg("adopted a run whose start the last daemon did not live to record")
	}
	return err
}

func (d *Driver) newInstance(dir string, rec *record) *instance {
	return &instance{
		name:     rec.Spec.Name,
		dir:      dir,
		rec:      rec,
		logs:     &logSet{path: filepath.Join(dir, "output.log"), max: d.opts.LogMaxBytes, keep: d.opts.LogFiles},
		lastExit: drivers.Exit{Name: rec.Spec.Name, ExitCode: rec.ExitCode, Signal: rec.Signal, Reason: rec.Reason},
		watches:  make(map[uint64]*drivers.OnceWatch),
	}
}

// Close stops watching and releases Dir. Running workloads keep running
// (a daemon restart must not restart them); a new Driver on the same Dir
// adopts them. Watches never fire after Close.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.done)
	d.logMu.Lock()
	d.logStop = true
	if d.rotation != nil {
		d.rotation.Stop()
	}
	for in, wd := range d.logWds {
		delete(d.logWds, in)
		theLogWatcher.unwatch(wd)
	}
	d.logMu.Unlock()
	all := make([]*instance, 0, len(d.instances))
	for _, in := range d.instances {
		all = append(all, in)
	}
	d.mu.Unlock()
	d.rotating.Wait()
	for _, in := range all {
		in.mu.Lock()
		if in.proc != nil {
			d.r.detach(in.proc)
		}
		if in.cg != nil {
			in.cg.Close() // its counters' descriptors; the next driver opens them again
		}
		for _, w := range in.watches {
			w.Cancel()
		}
		clear(in.watches)
		in.mu.Unlock()
	}
	theLogWatcher.release()
	d.r.release()
	d.bg.Wait()
	d.null.Close()
	return d.lock.Close()
}

// Name is "process".
func (d *Driver) Name() string { return DriverName }

func (d *Driver) errorf(op, name string, kind error, format string, args ...any) error {
	return drivers.Errorf(DriverName, op, name, kind, format, args...)
}

// get returns the live instance name, or ErrNotFound.
func (d *Driver) get(op, name string) (*instance, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, d.errorf(op, name, drivers.ErrInvalid, "driver closed")
	}
	in, ok := d.instances[name]
	if !ok {
		return nil, d.errorf(op, name, drivers.ErrNotFound, "")
	}
	return in, nil
}

// lockLive locks the instance and checks it was not deleted meanwhile.
func (d *Driver) lockLive(op, name string) (*instance, error) {
	in, err := d.get(op, name)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	if in.deleted {
		in.mu.Unlock()
		return nil, d.errorf(op, name, drivers.ErrNotFound, "")
	}
	return in, nil
}

// watch is one Watch registration: it fires at most once, never after
// cancel.

var _ drivers.Driver = (*Driver)(nil)
