package daemonconfig

import (
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/ports"
)

// DefaultPath is where the daemon looks for its config (DMN-1).
const DefaultPath = "/etc/engenho/engenho.yaml"

// Config is the daemon's configuration, after defaults, environment
// overrides and validation. Every field tagged `key` is a config key; its
// dotted name is the path of keys from the top (e.g. "edge.listen") and its
// environment override is ENGENHO_ plus that name upper-cased with '.'
// replaced by '_' (ENGENHO_EDGE_LISTEN). The `reload` tag says how a change
// takes effect (see Reload); a field without one inherits its section's,
// and the top default is "restart".
//
// Relative paths in the file (data_dir, stacks, objstore.fs.dir, incus
// certificate files) are resolved against the config file's directory, so
// Config holds absolute paths only.
type Config struct {
	Node        Node        `key:"node"`
	DataDir     string      `key:"data_dir" reload:"relaunch"`
	Log         Log         `key:"log"`
	Stacks      []string    `key:"stacks" reload:"live"`
	Control     Control     `key:"control" reload:"relaunch"`
	Drivers     Drivers     `key:"drivers"`
	Ports       Ports       `key:"ports"`
	Objstore    Objstore    `key:"objstore"`
	Edge        Edge        `key:"edge"`
	Metrics     Metrics     `key:"metrics" reload:"relaunch"`
	Supervision Supervision `key:"supervision"`
	Sweep       Sweep       `key:"sweep" reload:"live"`
	Usage       Usage       `key:"usage"`
	Probe       Probe       `key:"probe" reload:"live"`
	Drain       Drain       `key:"drain" reload:"live"`
	Boot        Boot        `key:"boot" reload:"live"`
	Journal     Journal     `key:"journal"`
	Chaos       Chaos       `key:"chaos"`

	// File is the absolute path of the config file this was read from.
	File string
	// StackFiles are the stack files Stacks resolved to when the config
	// was loaded: absolute, sorted, without duplicates (see ResolveStacks).
	StackFiles []string
	// Warnings are things worth logging that are not errors: ENGENHO_*
	// variables that look like overrides of no key, a drain budget past
	// systemd's stop timeout.
	Warnings []string
}

// Node names this machine.
type Node struct {
	// Name identifies the node in leases and events; default the hostname.
	Name string `key:"name"`
}

// Log configures the daemon's logger (DMN-17).
type Log struct {
	// Level is trace, debug, info, warn or error.
	Level string `key:"level" reload:"live"`
	// Format is auto (console on a terminal, JSON otherwise), json or
	// console.
	Format string `key:"format" reload:"relaunch"`
}

// ZerologLevel is Level parsed (Load has validated it).
func (l Log) ZerologLevel() zerolog.Level {
	lvl, err := ParseLevel(l.Level)
	if err != nil {
		return zerolog.InfoLevel
	}
	return lvl
}

// Control configures the control socket (DMN-11).
type Control struct {
	// Group, when set, may also use the socket (mode 0660 instead of 0600):
	// a group name or a numeric gid.
	Group string `key:"group"`
	// IdleTimeout closes a connection that sent nothing for this long.
	IdleTimeout time.Duration `key:"idle_timeout"`
	// MaxRequest bounds one request line.
	MaxRequest Size `key:"max_request"`
}

// Drivers configures the instance drivers.
type Drivers struct {
	Process ProcessDriver `key:"process"`
	Incus   IncusDriver   `key:"incus"`
}

// ProcessDriver configures the local-process driver (DRV-3).
type ProcessDriver struct {
	Enabled bool `key:"enabled"`
	// LogMaxBytes is the size at which an instance's output file rotates.
	LogMaxBytes Size `key:"log_max_bytes"`
	// LogFiles is how many rotated files are kept besides the current one.
	LogFiles int `key:"log_files"`
	// CgroupRoot is the subtree below each cgroup hierarchy that every
	// instance's cgroup goes in (DRV-12).
	CgroupRoot string `key:"cgroup_root"`
}

// Ports configures the host ports engenho hands out to instances (SVC-24).
type Ports struct {
	// InstanceRange is LOW-HIGH (1024 <= LOW <= HIGH <= 65535): every new
	// instance's host ports come from it. A restart key: the allocator is
	// made at boot, and the ports of the adopted instances count as in use.
	InstanceRange string `key:"instance_range"`
}

// Range is InstanceRange parsed (Load has validated it; the default range
// otherwise).
func (p Ports) Range() ports.Range {
	r, err := ports.ParseRange(p.InstanceRange)
	if err != nil {
		return ports.DefaultRange
	}
	return r
}

// IncusDriver configures the incus driver (DRV-5).
type IncusDriver struct {
	Enabled bool `key:"enabled"`
	// Socket is incusd's unix socket, used when RemoteURL is empty.
	Socket string `key:"socket"`
	// Project is the incus project; empty is the server's default.
	Project string `key:"project"`
	// RemoteURL is an https:// incus server used instead of the socket;
	// ClientCert and ClientKey (PEM files) are then required, ServerCA
	// (PEM) optional.
	RemoteURL  string `key:"remote_url"`
	ClientCert string `key:"client_cert"`
	ClientKey  string `key:"client_key"`
	ServerCA   string `key:"server_ca"`
	// StoragePool, when set, is each instance's root disk pool.
	StoragePool string `key:"storage_pool"`
	// Profiles applied to each instance.
	Profiles []string `key:"profiles"`
}

// Objstore configures the object store hibernating hosts park in (DRV-8).
type Objstore struct {
	// Kind is fs or s3.
	Kind string `key:"kind"`
	// Prefix is prepended to every key (PREFIX/HOST/lease.json, ACT-5);
	// nodes sharing a bucket and a prefix share hosts.
	Prefix string  `key:"prefix"`
	FS     FSStore `key:"fs"`
	S3     S3Store `key:"s3"`
}

// FSStore configures the directory store (DRV-9).
type FSStore struct {
	// Dir is the store's directory; default DATA_DIR/objstore.
	Dir string `key:"dir"`
}

// S3Store configures the S3 store (DRV-10). Empty credentials use the AWS
// default chain.
type S3Store struct {
	Endpoint  string         `key:"endpoint"`
	Region    string         `key:"region"`
	Bucket    string         `key:"bucket"`
	PathStyle bool           `key:"path_style"`
	AccessKey string         `key:"access_key"`
	SecretKey drivers.Secret `key:"secret_key"`
	// SessionToken goes with temporary credentials.
	SessionToken drivers.Secret `key:"session_token"`
	// PartSize is the multipart threshold and part size; 0 = the store's
	// default (16 MiB).
	PartSize Size `key:"part_size"`
	// MaxAttempts per call of the SDK's standard retryer; 0 = default (3).
	MaxAttempts int `key:"max_attempts"`
}

// Edge configures the HTTP edge (ACT-1).
type Edge struct {
	// Listen is host:port; empty turns the edge off.
	Listen string `key:"listen"`
}

// Metrics configures the Prometheus endpoint (DMN-19).
type Metrics struct {
	// Listen is host:port; empty turns metrics off.
	Listen string `key:"listen"`
}

// Supervision configures the root supervisor (SUP-7, SUP-8) and the
// ladder that paces actor restarts (SUP-10).
type Supervision struct {
	// Strategy is one_for_one, one_for_all or rest_for_one.
	Strategy string `key:"strategy"`
	// MaxRestarts within Period end the supervisor (intensity).
	MaxRestarts int           `key:"max_restarts"`
	Period      time.Duration `key:"period"`
	Ladder      Ladder        `key:"ladder"`
}

// Ladder is the backoff ladder's configuration (SUP-10, SUP-11); the
// daemon turns it into actors/supervise/ladder's Config.
type Ladder struct {
	Immediate int             `key:"immediate"`
	Delays    []time.Duration `key:"delays"`
	Cap       time.Duration   `key:"cap"`
	// Jitter spreads each wait by up to ±Jitter of itself (0..1).
	Jitter float64 `key:"jitter"`
	// Stable is the window that resets a ledger.
	Stable time.Duration `key:"stable"`
}

// Sweep configures the periodic pass that inspects replicas and wakes
// hosts whose due time came (ACT-10).
type Sweep struct {
	Interval time.Duration `key:"interval"`
}

// Usage configures the sampling of every replica's resource usage
// (DRV-16).
type Usage struct {
	// Interval is how often usage is read; 0 turns sampling off.
	Interval time.Duration `key:"interval"`
}

// Probe holds the health check timings used where a stack file's
// healthcheck does not set its own (the defaults follow Compose).
type Probe struct {
	Interval      time.Duration `key:"interval"`
	Timeout       time.Duration `key:"timeout"`
	StartInterval time.Duration `key:"start_interval"`
	Retries       int           `key:"retries"`
}

// Drain configures stop (DMN-8).
type Drain struct {
	// Budget bounds the whole drain.
	Budget time.Duration `key:"budget"`
}

// Boot configures boot attempts (DMN-7).
type Boot struct {
	// StepTimeout bounds one boot phase.
	StepTimeout time.Duration `key:"step_timeout"`
}

// Journal configures the journal (DMN-10).
type Journal struct {
	Events Events `key:"events"`
	// Reserve is the free space the journal keeps on its disk: below it,
	// writes (intents, events) are refused instead of filling the disk
	// (issue 18). 0 is the journal's default (112MiB).
	Reserve Size `key:"reserve"`
}

// Events bounds the event log: 0 means no bound of that kind.
type Events struct {
	MaxCount int           `key:"max_count"`
	MaxAge   time.Duration `key:"max_age"`
}

// Retention returns the bounds in the journal's convention: a negative
// value means no bound.
func (e Events) Retention() (maxEvents int, maxAge time.Duration) {
	maxEvents, maxAge = e.MaxCount, e.MaxAge
	if maxEvents == 0 {
		maxEvents = -1
	}
	if maxAge == 0 {
		maxAge = -1
	}
	return maxEvents, maxAge
}

// Chaos gates the fault-injection hooks the chaos suite drives.
type Chaos struct {
	Enabled bool `key:"enabled"`
}

// Defaults returns the configuration used for every key the file and the
// environment leave unset. Node.Name and Objstore.FS.Dir depend on the
// machine and the data directory and are filled by Load.
func Defaults() Config {
	return Config{
		DataDir: "/var/lib/engenho",
		Log:     Log{Level: "info", Format: "auto"},
		Control: Control{IdleTimeout: 5 * time.Minute, MaxRequest: MiB},
		Drivers: Drivers{
			Process: ProcessDriver{Enabled: true, LogMaxBytes: 10 * MiB, LogFiles: 3, CgroupRoot: "engenho"},
			Incus:   IncusDriver{Socket: "/var/lib/incus/unix.socket", Profiles: []string{"default"}},
		},
		Ports:    Ports{InstanceRange: ports.DefaultRange.String()},
		Objstore: Objstore{Kind: "fs", Prefix: "engenho"},
		Supervision: Supervision{
			Strategy: "one_for_one", MaxRestarts: 3, Period: 5 * time.Second,
			Ladder: defaultLadder(),
		},
		Sweep:   Sweep{Interval: 10 * time.Second},
		Usage:   Usage{Interval: 5 * time.Second},
		Probe:   Probe{Interval: 30 * time.Second, Timeout: 30 * time.Second, StartInterval: 5 * time.Second, Retries: 3},
		Drain:   Drain{Budget: 60 * time.Second},
		Boot:    Boot{StepTimeout: 2 * time.Minute},
		Journal: Journal{Events: Events{MaxCount: 100_000, MaxAge: 30 * 24 * time.Hour}},
	}
}

// defaultLadder is the spec's ladder (SUP-10): 3 at once, then 1m, 2m, 4m,
// 8m, then 15m; reset after 5m stable; no jitter. A test keeps it equal to
// ladder.Default.
func defaultLadder() Ladder {
	return Ladder{
		Immediate: 3,
		Delays:    []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute},
		Cap:       15 * time.Minute,
		Stable:    5 * time.Minute,
	}
}

// hostname is the default node name.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}
