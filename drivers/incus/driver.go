package incus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
)

// DriverName is the driver's config name.
const DriverName = "incus"

// Defaults.
const (
	DefaultPollInterval = 250 * time.Millisecond
	DefaultLogMaxBytes  = 8 << 20
	defaultProfile      = "default"
	// callTimeout bounds calls the driver makes without a caller's ctx
	// (Watch's first look, the poller).
	callTimeout = 30 * time.Second
)

// Config keys and device names the driver writes on an instance.
const (
	labelPrefix = "user."
	envPrefix   = "environment."
	portPrefix  = "engenho-port-"
)

// Options configure the driver. The zero value talks to the local incusd
// over DefaultSocket in the default project with the default profile.
type Options struct {
	// Socket is incusd's unix socket (DefaultSocket when empty).
	Socket string
	// RemoteURL, when set, is an https:// incus server used instead of the
	// socket; ClientCert/ClientKey (PEM files) authenticate us and ServerCA
	// (optional PEM) is what its certificate must chain to.
	RemoteURL  string
	ClientCert string
	ClientKey  string
	ServerCA   string
	// Project is the incus project (incusd's default when empty).
	Project string
	// StoragePool, when set, must exist (New checks it) and becomes each
	// instance's root disk pool; empty uses the profile's root disk.
	StoragePool string
	// Profiles applied to each instance (["default"] when nil).
	Profiles []string
	// Clock drives the watch poller and log following (clock.New()).
	Clock clock.Clock
	// Logger receives the driver's own messages (none when nil).
	Logger *zerolog.Logger
	// PollInterval is how often watched instances and followed logs are
	// looked at (DefaultPollInterval).
	PollInterval time.Duration
	// LogMaxBytes is the size past which a container's output log is
	// rotated to output.log.1 (DefaultLogMaxBytes).
	LogMaxBytes int64
	// Sealer keeps the values of a spec's secret files sealed in the
	// instance's config (SEC-2); without one, specs with Secrets are
	// refused.
	Sealer drivers.Sealer
}

// Driver runs workloads as incus containers (spec DRV-5, DRV-6). It is
// safe for concurrent use; Close stops its watch poller.
type Driver struct {
	c        *Client
	opts     Options
	clock    clock.Clock
	log      zerolog.Logger
	profiles []string

	exits   sync.Map // name -> cachedExit
	files   fileGate
	gate    instanceGate
	watcher *watcher
	// idmapped: the kernel has idmapped mounts, so bind mounts are shifted.
	idmapped bool
}

var _ drivers.Driver = (*Driver)(nil)

// New connects to incusd, checks it answers and trusts us, and checks the
// storage pool when one is set. An incusd that does not answer is an
// ErrTransient error naming the socket and how to start incusd.
func New(opts Options) (*Driver, error) {
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.LogMaxBytes <= 0 {
		opts.LogMaxBytes = DefaultLogMaxBytes
	}
	log := zerolog.Nop()
	if opts.Logger != nil {
		log = opts.Logger.With().Str("driver", DriverName).Logger()
	}
	profiles := opts.Profiles
	if profiles == nil {
		profiles = []string{defaultProfile}
	}
	c, err := NewClient(ClientConfig{
		Socket: opts.Socket, RemoteURL: opts.RemoteURL, ClientCert: opts.ClientCert,
		ClientKey: opts.ClientKey, ServerCA: opts.ServerCA, Project: opts.Project,
	})
	if err != nil {
		return nil, drivers.Wrap(DriverName, "connect", "", drivers.ErrInvalid, err)
	}
	d := &Driver{c: c, opts: opts, clock: opts.Clock, log: log, profiles: profiles}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	info, err := c.Server(ctx)
	if err != nil {
		c.Close()
		return nil, d.fail("connect", "", err)
	}
	if info.Auth != "trusted" {
		c.Close()
		return nil, drivers.Errorf(DriverName, "connect", "", drivers.ErrInvalid, "incus server %s does not trust this client (auth %q): add its certificate to the server's trust store", c.Where(), info.Auth)
	}
	if err := d.checkPool(ctx); err != nil {
		c.Close()
		return nil, err
	}
	d.idmapped = info.Environment.KernelFeatures["idmapped_mounts"] == "true"
	d.watcher = newWatcher(d)
	log.Debug().Str("server", c.Where()).Str("version", info.Environment.ServerVersion).Str("project", opts.Project).Msg("connected to incus")
	return d, nil
}

// Close stops the watch poller (no watch fires afterwards) and releases
// connections. Instances keep running.
func (d *Driver) Close() error {
	d.watcher.close()
	d.c.Close()
	return nil
}

// Client is the driver's REST client, for callers that need more.
func (d *Driver) Client() *Client { return d.c }

func (d *Driver) Name() string { return DriverName }

// Validate checks spec without creating anything: the name, the fields
// incus cannot honour, the image alias, the storage pool and the profiles.
func (d *Driver) Validate(ctx context.Context, spec drivers.Spec) error {
	if err := d.checkSpec(spec, false); err != nil {
		return err
	}
	if err := d.checkImage(ctx, spec); err != nil {
		return err
	}
	if err := d.checkPool(ctx); err != nil {
		return err
	}
	if hasVolume(spec) {
		if _, err := d.volumePool(ctx); err != nil {
			return d.fail("validate", spec.Name, err)
		}
	}
	for _, p := range d.profiles {
		if _, err := d.c.Profile(ctx, p); err != nil {
			if IsNotFound(err) {
				return drivers.Errorf(DriverName, "validate", spec.Name, drivers.ErrInvalid, "incus profile %q does not exist in project %q", p, d.projectName())
			}
			return d.fail("validate", spec.Name, err)
		}
	}
	return nil
}

func (d *Driver) projectName() string {
	if d.opts.Project == "" {
		return "default"
	}
	return d.opts.Project
}

func (d *Driver) checkImage(ctx context.Context, spec drivers.Spec) error {
	if _, err := d.c.ImageAlias(ctx, spec.Image); err != nil {
		if IsNotFound(err) {
			return drivers.Errorf(DriverName, "validate", spec.Name, drivers.ErrInvalid, "image alias %q does not exist on incus server %s (project %q); import it first, e.g. `bash drivers/incus/setup.sh` makes \"busybox\"", spec.Image, d.c.Where(), d.projectName())
		}
		return d.fail("validate", spec.Name, err)
	}
	return nil
}

func (d *Driver) checkPool(ctx context.Context) error {
	if d.opts.StoragePool == "" {
		return nil
	}
	if _, err := d.c.StoragePool(ctx, d.opts.StoragePool); err != nil {
		if IsNotFound(err) {
			return drivers.Errorf(DriverName, "validate", "", drivers.ErrInvalid, "storage pool %q does not exist on incus server %s; create it with `incus storage create %s dir`", d.opts.StoragePool, d.c.Where(), d.opts.StoragePool)
		}
		return d.fail("validate", "", err)
	}
	return nil
}

// checkName applies the shared name rule (SEC-3) and incus's own: a
// hostname of at most 63 characters, not ending in '-', not all digits.
func checkName(op, name string) error {
	if err := drivers.CheckName(name); err != nil {
		return drivers.Wrap(DriverName, op, "", drivers.ErrInvalid, err)
	}
	if len(name) > 63 {
		return drivers.Errorf(DriverName, op, name, drivers.ErrInvalid, "incus instance names are at most 63 characters, this one has %d", len(name))
	}
	if strings.HasSuffix(name, "-") {
		return drivers.Errorf(DriverName, op, name, drivers.ErrInvalid, "incus instance names must not end with '-'")
	}
	if _, err := strconv.ParseUint(name, 10, 64); err == nil {
		return drivers.Errorf(DriverName, op, name, drivers.ErrInvalid, "incus instance names must not be a number")
	}
	return nil
}

// checkSpec checks what needs no server (see checkSpecFields), then the
// mounts' bind sources and the secret files.
func (d *Driver) checkSpec(spec drivers.Spec, creating bool) error {
	if err := checkSpecFields(spec, creating); err != nil {
		return err
	}
	if err := d.checkBindSources(spec, "validate"); err != nil {
		return err
	}
	return d.checkSecrets(spec, func(format string, args ...any) error {
		return drivers.Errorf(DriverName, "validate", spec.Name, drivers.ErrInvalid, format, args...)
	})
}

// checkSpecFields checks what needs no server. At validation a published
// port may have no host port yet: the service allocates one per instance
// at creation.
func checkSpecFields(spec drivers.Spec, creating bool) error {
	if err := checkName("validate", spec.Name); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return drivers.Errorf(DriverName, "validate", spec.Name, drivers.ErrInvalid, format, args...)
	}
	if spec.Image == "" {
		return bad("spec has no image: the incus driver needs an image alias (e.g. busybox)")
	}
	if spec.User != "" {
		return drivers.Errorf(DriverName, "validate", spec.Name, drivers.ErrUnsupported, "user %q: the incus driver runs the command as the container's root (already unprivileged on the host)", spec.User)
	}
	for k := range spec.Labels {
		if !validKey(k) {
			return bad("label key %q: want letters, digits, '.', '-', '_' and '/'", k)
		}
		if labelPrefix+k == sealedKey {
			return bad("label key %q is the driver's own", k)
		}
	}
	if err := checkMounts(spec, bad); err != nil {
		return err
	}
	for k := range spec.Env {
		if k == "" || strings.ContainsAny(k, "= \t\n\x00") {
			return bad("environment variable name %q is not valid", k)
		}
	}
	seen := map[int]bool{}
	for _, p := range spec.Ports {
		if p.Target < 1 || p.Target > 65535 || p.HostPort < 0 || p.HostPort > 65535 || (creating && p.HostPort == 0) {
			return bad("port %d->%d: both the target and the host port must be 1-65535", p.HostPort, p.Target)
		}
		if proto := p.Protocol; proto != "" && proto != "tcp" && proto != "udp" {
			return bad("port %d: protocol %q is not tcp or udp", p.Target, proto)
		}
		if seen[p.Target] {
			return bad("port %d is published twice", p.Target)
		}
		seen[p.Target] = true
	}
	if r := spec.Resources; r.CPUs < 0 || r.MemoryBytes < 0 || r.Pids < 0 || r.MemoryReservationBytes < 0 {
		return bad("resources must not be negative")
	}
	if spec.Resources.MemoryReservationBytes > 0 {
		// Refused, never skipped (DRV-17): incus has no reservation key.
		return bad("a memory reservation cannot be enforced by the incus driver (incus has no such limit); remove it or use the process driver")
	}
	return nil
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_/", c)
		if !ok {
			return false
		}
	}
	return true
}

// Create makes a stopped container from spec.Image. Labels become user.*
// config keys, Env environment.* keys, each port a proxy device on host
// loopback (DRV-6), each mount a disk device (volumes.go: a named volume
// missing is created first, and kept when the instance goes), the secret
// files a sealed config key and a tmpfs (secrets.go). With a Command, the
// container's init is an entrypoint script written into it (see
// entrypoint); a failure after the instance exists deletes it again, so
// nothing is half-created.
func (d *Driver) Create(ctx context.Context, spec drivers.Spec) error {
	if err := d.checkSpec(spec, true); err != nil {
		return asOp(err, "create")
	}
	if err := d.checkImage(ctx, spec); err != nil {
		return asOp(err, "create")
	}
	if _, err := d.c.Instance(ctx, spec.Name); err == nil {
		return drivers.Errorf(DriverName, "create", spec.Name, drivers.ErrInvalid, "an instance named %q already exists", spec.Name)
	} else if !IsNotFound(err) {
		return d.fail("create", spec.Name, err)
	}
	post := d.instancePost(spec)
	if len(spec.Mounts) > 0 {
		pool, err := d.volumePool(ctx)
		if err == nil {
			err = d.ensureVolumes(ctx, spec, pool)
		}
		if err != nil {
			return d.fail("create", spec.Name, err)
		}
		maps.Copy(post.Devices, d.mountDevices(spec, pool))
	}
	if len(spec.Secrets) > 0 {
		sealed, err := d.sealSecrets(spec)
		if err != nil {
			return drivers.Errorf(DriverName, "create", spec.Name, drivers.ErrInvalid, "sealing the secret files failed")
		}
		post.Config[sealedKey] = sealed
		post.Config["raw.lxc"] += "\n" + secretsMount
	}
	if err := d.c.CreateInstance(ctx, post); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusConflict {
			return drivers.Errorf(DriverName, "create", spec.Name, drivers.ErrInvalid, "an instance named %q already exists", spec.Name)
		}
		return d.fail("create", spec.Name, err)
	}
	if len(spec.Command) > 0 {
		if err := d.writeEntrypoint(ctx, spec); err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			defer cancel()
			if derr := d.c.DeleteInstance(cctx, spec.Name); derr != nil {
				d.log.Warn().Err(derr).Str("instance", spec.Name).Msg("could not delete a half-created instance")
			}
			return d.fail("create", spec.Name, fmt.Errorf("writing the entrypoint: %w", err))
		}
	}
	d.log.Debug().Str("instance", spec.Name).Str("image", spec.Image).Int("ports", len(spec.Ports)).Msg("created")
	return nil
}

func (d *Driver) instancePost(spec drivers.Spec) InstancesPost {
	config := map[string]string{}
	for k, v := range spec.Labels {
		if v != "" { // incus would drop it anyway
			config[labelPrefix+k] = v
		}
	}
	for k, v := range spec.Env {
		config[envPrefix+k] = v
	}
	if cpus := spec.Resources.CPUs; cpus > 0 {
		config["limits.cpu"] = strconv.Itoa(int(math.Ceil(cpus)))
		config["limits.cpu.allowance"] = fmt.Sprintf("%dms/100ms", int(math.Ceil(cpus*100)))
	}
	if mem := spec.Resources.MemoryBytes; mem > 0 {
		config["limits.memory"] = strconv.FormatInt(mem, 10) + "B"
		config["limits.memory.swap"] = "false" // the limit holds swap too (DRV-13)
	}
	if pids := spec.Resources.Pids; pids > 0 {
		config["limits.processes"] = strconv.FormatInt(pids, 10)
	}
	if len(spec.Command) > 0 {
		config["raw.lxc"] = initConfig
	}
	devices := map[string]map[string]string{}
	for _, p := range spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		devices[portPrefix+strconv.Itoa(p.Target)] = ProxyDevice(
			fmt.Sprintf("%s:127.0.0.1:%d", proto, p.HostPort),
			fmt.Sprintf("%s:127.0.0.1:%d", proto, p.Target))
	}
	if d.opts.StoragePool != "" {
		devices["root"] = map[string]string{"type": "disk", "path": "/", "pool": d.opts.StoragePool}
	}
	return InstancesPost{
		Name: spec.Name, Type: "container",
		Source:   InstanceSource{Type: "image", Alias: spec.Image},
		Config:   config,
		Devices:  devices,
		Profiles: d.profiles,
	}
}

func (d *Driver) writeEntrypoint(ctx context.Context, spec drivers.Spec) error {
	if err := d.withFiles(ctx, spec.Name, func() error {
		return d.c.MakeDir(ctx, spec.Name, stateDir, 0o755)
	}); err != nil {
		return err
	}
	script := entrypoint(stateDir, spec.Command, spec.WorkingDir, d.opts.LogMaxBytes, len(spec.Secrets) > 0)
	return d.withFiles(ctx, spec.Name, func() error {
		return d.c.WriteFile(ctx, spec.Name, entrypointPath, []byte(script), 0o755)
	})
}

// Start starts the container and delivers its secret files (secrets.go);
// a running one is left as it is (given its secret files if it lacks
// them). The start waits for the instance's file request in flight, if
// any (instanceGate). While incusd finishes a stop (see instance) it
// refuses a start; Start then tries again every 50ms for up to
// settleTimeout.
func (d *Driver) Start(ctx context.Context, name string) error {
	if err := checkName("start", name); err != nil {
		return err
	}
	// Its config (the sealed secret files) and last run, before the start.
	var before Instance
	if err := d.c.get(ctx, instancePath(name), nil, &before); err != nil {
		return d.fail("start", name, err)
	}
	deadline := d.clock.Now().Add(settleTimeout)
	for try := 1; ; try++ {
		err := d.gated(ctx, name, func() error { return d.c.SetState(ctx, name, StatePut{Action: "start"}) })
		if err == nil {
			if err := d.deliverSecrets(ctx, before); err != nil {
				return err
			}
			d.log.Debug().Str("instance", name).Msg("started")
			return nil
		}
		in, ierr := d.instance(ctx, name)
		var oe *OperationError
		switch {
		case ierr == nil && mapState(in.Status) == drivers.StateRunning && in.State != nil:
			return d.secretsIfMissing(ctx, in) // already running
		case ierr == nil && mapState(in.Status) == drivers.StateStopped && in.LastUsedAt.After(before.LastUsedAt):
			// It ran and its command has ended already: incusd then fails
			// the start it was still finishing ("no such file or
			// directory", a 404). Started, not to be started twice.
			return nil
		case IsNotFound(ierr):
			return d.fail("start", name, ierr)
		case !errors.As(err, &oe) || (try > 1 && !d.clock.Now().Before(deadline)):
			// A failed start operation is always tried a second time:
			// under load incusd fails some with its own timeouts.
			return d.fail("start", name, err)
		}
		if !d.pause(ctx, 50*time.Millisecond) {
			return d.fail("start", name, err)
		}
	}
}

// Stop asks the container to stop, waits up to grace, then forces it.
// A container running a Command gets SIGTERM at its init through an exec
// (`kill -TERM 1`; the entrypoint passes it to every process) and the
// driver watches it stop: incus's own clean stop counts its timeout in
// whole seconds and, timed out, holds the instance's operation lock so the
// forced stop after it can stall. A container on its image's init gets
// incus's clean stop (SIGPWR) with grace rounded up to seconds.
func (d *Driver) Stop(ctx context.Context, name string, grace time.Duration) error {
	if err := checkName("stop", name); err != nil {
		return err
	}
	in, err := d.instance(ctx, name)
	if err != nil {
		return d.fail("stop", name, err)
	}
	if mapState(in.Status) == drivers.StateStopped {
		return nil
	}
	if grace > 0 {
		if hasEntrypoint(in) {
			if d.terminate(ctx, name, grace) {
				return nil
			}
		} else {
			secs := int(math.Ceil(grace.Seconds()))
			if err := d.c.SetState(ctx, name, StatePut{Action: "stop", Timeout: secs}); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return d.fail("stop", name, ctx.Err())
		}
		d.log.Debug().Str("instance", name).Dur("grace", grace).Msg("not stopped within the grace, forcing")
	}
	return asOp(d.Kill(ctx, name), "stop")
}

// terminate sends SIGTERM to the container's init and reports whether the
// container stopped within grace (polled every 50ms on the driver's clock).
func (d *Driver) terminate(ctx context.Context, name string, grace time.Duration) bool {
	if _, err := d.c.Exec(ctx, name, ExecPost{Command: []string{"/bin/sh", "-c", "kill -TERM 1"}}); err != nil {
		d.log.Debug().Err(err).Str("instance", name).Msg("could not signal the init")
	}
	deadline := d.clock.Now().Add(grace)
	for {
		in, err := d.instance(ctx, name)
		if err == nil && mapState(in.Status) == drivers.StateStopped {
			return true
		}
		if ctx.Err() != nil || !d.clock.Now().Before(deadline) {
			return false
		}
		t := d.clock.NewTimer(min(50*time.Millisecond, deadline.Sub(d.clock.Now())))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}

// Kill forces the container to stop at once.
func (d *Driver) Kill(ctx context.Context, name string) error {
	if err := checkName("kill", name); err != nil {
		return err
	}
	err := d.c.SetState(ctx, name, StatePut{Action: "stop", Force: true})
	if err == nil {
		return nil
	}
	if st, ierr := d.Inspect(ctx, name); ierr == nil && st.State == drivers.StateStopped {
		return nil // already stopped
	} else if errors.Is(ierr, drivers.ErrNotFound) {
		return asOp(ierr, "kill")
	}
	return d.fail("kill", name, err)
}

// Delete removes a stopped container; a running one is refused
// (ErrInvalid) and left running.
func (d *Driver) Delete(ctx context.Context, name string) error {
	if err := checkName("delete", name); err != nil {
		return err
	}
	for try := 1; ; try++ {
		in, err := d.instance(ctx, name)
		if err != nil {
			return d.fail("delete", name, err)
		}
		if state := mapState(in.Status); state != drivers.StateStopped {
			return drivers.Errorf(DriverName, "delete", name, drivers.ErrInvalid, "instance is %s; stop it first", state)
		}
		err = d.c.DeleteInstance(ctx, name)
		if err == nil {
			break
		}
		// Seen stopped just before incusd began its stop hook: it refuses
		// until the hook is done (a 400, or a failed delete operation:
		// "busy running a stop operation", seen when a command ended as
		// it was killed); look again (instance waits it out).
		var ae *APIError
		var oe *OperationError
		refused := errors.As(err, &ae) && ae.Status == http.StatusBadRequest || errors.As(err, &oe)
		if try == 5 || !refused {
			return d.fail("delete", name, err)
		}
		if !d.pause(ctx, 100*time.Millisecond) {
			return d.fail("delete", name, err)
		}
	}
	d.exits.Delete(name)
	d.files.forget(name)
	return nil
}

// Inspect reports the container's state. StartedAt and Pid (the host pid
// of its init) are set while it runs; ExitCode is the last run's, read from
// the exit-code file the entrypoint leaves (-1 when the run was killed or
// the container has no Command).
func (d *Driver) Inspect(ctx context.Context, name string) (drivers.Status, error) {
	if err := checkName("inspect", name); err != nil {
		return drivers.Status{}, err
	}
	in, err := d.instance(ctx, name)
	if err != nil {
		return drivers.Status{}, d.fail("inspect", name, err)
	}
	return d.status(ctx, in), nil
}

// Usage reads the container's usage from incusd's state API
// (GET /1.0/instances/NAME/state, DRV-16): cpu.usage, memory.usage and
// usage_peak, processes, all counted since the container started. A
// stopped container uses nothing.
func (d *Driver) Usage(ctx context.Context, name string) (drivers.Usage, error) {
	if err := checkName("usage", name); err != nil {
		return drivers.Usage{}, err
	}
	st, err := d.c.InstanceState(ctx, name)
	if err != nil {
		return drivers.Usage{}, d.fail("usage", name, err)
	}
	if mapState(st.Status) != drivers.StateRunning {
		return drivers.Usage{}, nil
	}
	return drivers.Usage{
		CPU:         time.Duration(st.CPU.Usage),
		MemoryBytes: st.Memory.Usage, MemoryPeakBytes: st.Memory.UsagePeak,
		Pids: st.Processes,
	}, nil
}

// settleTimeout bounds how long the driver waits for incusd to finish a
// stop it is processing (see instance). The hook takes ~0.1-1s on an idle
// machine; on a loaded one (CI, with the chaos campaign's containers beside
// the conformance suite's) it was seen to refuse a start for over 10s.
const settleTimeout = 30 * time.Second

// instance gets one instance with its state. When a container's init has
// ended, incusd runs its stop hook for a while (~0.1-1s) and meanwhile
// reports the instance Running and fails a read of its state with a 500
// ("Invalid PID"); it also refuses start and delete then. Such an answer
// is tried again every 50ms until incusd has settled (settleTimeout at
// most), then the instance is read without its state.
func (d *Driver) instance(ctx context.Context, name string) (Instance, error) {
	deadline := d.clock.Now().Add(settleTimeout)
	for {
		in, err := d.c.Instance(ctx, name)
		var ae *APIError
		if err == nil || !errors.As(err, &ae) || ae.Status < 500 && !d.settling(ctx, name, ae) {
			return in, err
		}
		if !d.clock.Now().Before(deadline) {
			var plain Instance
			if perr := d.c.get(ctx, instancePath(name), nil, &plain); perr != nil {
				return in, err
			}
			return plain, nil
		}
		if !d.pause(ctx, 50*time.Millisecond) {
			return in, err
		}
	}
}

// settling: in the same window incusd may also answer a 404 for the
// state of an instance that exists (its init's /proc entry is gone). The
// instance without its state tells the two apart.
func (d *Driver) settling(ctx context.Context, name string, ae *APIError) bool {
	if ae.Status != http.StatusNotFound {
		return false
	}
	var plain Instance
	return d.c.get(ctx, instancePath(name), nil, &plain) == nil
}

// pause waits dur on the driver's clock; false when ctx ended first.
func (d *Driver) pause(ctx context.Context, dur time.Duration) bool {
	t := d.clock.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// status turns an instance (with state) into a drivers.Status.
func (d *Driver) status(ctx context.Context, in Instance) drivers.Status {
	st := drivers.Status{
		Name:      in.Name,
		State:     mapState(in.Status),
		Labels:    labelsOf(in.Config),
		Addresses: addressesOf(in.Devices),
		ExitCode:  -1,
	}
	if in.State != nil && st.State != drivers.StateStopped {
		st.Pid = int(in.State.Pid)
		st.StartedAt = in.State.StartedAt
	}
	if st.State == drivers.StateStopped && hasEntrypoint(in) {
		st.ExitCode, _, _ = d.lastExit(ctx, in)
	}
	return st
}

func hasEntrypoint(in Instance) bool { return strings.Contains(in.Config["raw.lxc"], entrypointPath) }

// mapState maps incus's status names to the driver states.
func mapState(s string) drivers.State {
	switch s {
	case "Running", "Ready", "Stopping", "Thawed":
		return drivers.StateRunning
	case "Stopped":
		return drivers.StateStopped
	case "Starting", "Pending":
		return drivers.StateStarting
	case "Frozen", "Freezing":
		return drivers.StatePaused
	default:
		return drivers.StateUnknown
	}
}

func labelsOf(config map[string]string) drivers.Labels {
	l := drivers.Labels{}
	for k, v := range config {
		if key, ok := strings.CutPrefix(k, labelPrefix); ok && k != sealedKey {
			l[key] = v
		}
	}
	return l
}

// addressesOf reads the published ports back from the proxy devices.
func addressesOf(devices map[string]map[string]string) map[int]string {
	out := map[int]string{}
	for name, dev := range devices {
		if dev["type"] != "proxy" || !strings.HasPrefix(name, portPrefix) {
			continue
		}
		target, err := strconv.Atoi(strings.TrimPrefix(name, portPrefix))
		if err != nil {
			continue
		}
		listen := dev["listen"] // tcp:127.0.0.1:PORT
		if i := strings.IndexByte(listen, ':'); i >= 0 {
			out[target] = listen[i+1:]
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// cachedExit is the exit read for one run (keyed by the instance's
// last_used_at, which incusd moves at every start).
type cachedExit struct {
	run    time.Time
	code   int
	signal string
}

// lastExit reads the last run's exit status from the exit-code file,
// mapping the shell's 128+N to signal N; ok is false when it could not be
// read (incusd busy with the container), and nothing is cached then.
func (d *Driver) lastExit(ctx context.Context, in Instance) (code int, signal string, ok bool) {
	if v, hit := d.exits.Load(in.Name); hit && v.(cachedExit).run.Equal(in.LastUsedAt) {
		return v.(cachedExit).code, v.(cachedExit).signal, true
	}
	if d.files.until(in.Name).After(d.clock.Now()) {
		return -1, "", false // see fileQuiet; a later Inspect reads it
	}
	code, signal = -1, "killed"
	var fr FileRange
	err := d.gated(ctx, in.Name, func() (err error) {
		fr, err = d.c.ReadFile(ctx, in.Name, stateDir+"/"+exitCodeName, 0)
		return err
	})
	d.noteFileError(in.Name, err)
	switch {
	case err == nil:
		if n, perr := strconv.Atoi(strings.TrimSpace(string(fr.Data))); perr == nil {
			code, signal = n, ""
			if n > 128 && n < 128+65 {
				code, signal = -1, syscall.Signal(n-128).String()
			}
		}
	case IsNotFound(err): // killed before it could write one
	default:
		d.log.Debug().Err(err).Str("instance", in.Name).Msg("could not read the exit code")
		return -1, "", false
	}
	d.exits.Store(in.Name, cachedExit{run: in.LastUsedAt, code: code, signal: signal})
	return code, signal, true
}

// List returns the instances whose labels include all of selector. The
// selector goes to incusd as a filter on the user.* keys and is applied
// again here, so a value the filter language cannot carry is still exact.
func (d *Driver) List(ctx context.Context, selector drivers.Labels) ([]drivers.Status, error) {
	list, err := d.c.Instances(ctx, labelFilter(selector))
	if err != nil {
		return nil, d.fail("list", "", err)
	}
	var out []drivers.Status
	for _, in := range list {
		st := d.status(ctx, in)
		if st.Labels.Match(selector) {
			out = append(out, st)
		}
	}
	return out, nil
}

// labelFilter builds `config.user.K eq V and ...` for the selector's pairs
// incus's filter language carries exactly: it splits on white space and
// mishandles quotes, so only values that are one plain word go (the rest is
// filtered here).
func labelFilter(selector drivers.Labels) string {
	var parts []string
	for k, v := range selector {
		if !validKey(k) || !plainWord(v) {
			continue
		}
		parts = append(parts, fmt.Sprintf(`config.%s%s eq %s`, labelPrefix, k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, " and ")
}

func plainWord(v string) bool {
	if v == "" {
		return false
	}
	for _, c := range v {
		if c <= ' ' || c == '"' || c == '\'' || c == '\\' || c >= 0x7f {
			return false
		}
	}
	return true
}

// Exec runs argv in the running container with record-output (no
// websocket): output comes from the exec-output logs, the exit code from
// the operation's metadata. The instance's environment.* keys apply.
func (d *Driver) Exec(ctx context.Context, name string, argv []string) (drivers.ExecResult, error) {
	if err := checkName("exec", name); err != nil {
		return drivers.ExecResult{}, err
	}
	if len(argv) == 0 {
		return drivers.ExecResult{}, drivers.Errorf(DriverName, "exec", name, drivers.ErrInvalid, "empty command")
	}
	res, err := d.c.Exec(ctx, name, ExecPost{Command: argv})
	if err != nil {
		var oe *OperationError
		if errors.As(err, &oe) && res.Return >= 0 {
			// The command ran and failed in a way incus reports as a
			// failed operation (e.g. not found in PATH): still a result.
			return drivers.ExecResult{ExitCode: res.Return, Stdout: res.Stdout, Stderr: res.Stderr}, nil
		}
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
			if st, ierr := d.Inspect(ctx, name); ierr == nil && st.State != drivers.StateRunning {
				return drivers.ExecResult{}, drivers.Errorf(DriverName, "exec", name, drivers.ErrInvalid, "instance is %s, not running", st.State)
			}
		}
		return drivers.ExecResult{}, d.fail("exec", name, err)
	}
	return drivers.ExecResult{ExitCode: res.Return, Stdout: res.Stdout, Stderr: res.Stderr}, nil
}

// fail wraps err from the client with its kind: unreachable incusd and
// server-side failures are transient, 404 not found, 400/409/403 invalid.
func (d *Driver) fail(op, name string, err error) error {
	var de *drivers.Error
	if errors.As(err, &de) {
		return err
	}
	kind := drivers.ErrTransient
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusNotFound:
			kind = drivers.ErrNotFound
		case http.StatusBadRequest, http.StatusConflict, http.StatusForbidden, http.StatusPreconditionFailed:
			kind = drivers.ErrInvalid
		}
	}
	return drivers.Wrap(DriverName, op, name, kind, err)
}

// asOp re-labels a driver error raised by a helper with the caller's op.
func asOp(err error, op string) error {
	var de *drivers.Error
	if errors.As(err, &de) && de.Op != op {
		cp := *de
		cp.Op = op
		return &cp
	}
	return err
}
