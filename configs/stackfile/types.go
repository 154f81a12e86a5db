package stackfile

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Stack is one parsed stack file: a named set of services (spec SVC-1).
// A Stack is a value the owner may share read-only; use Clone before
// changing a copy.
type Stack struct {
	// Name is the stack's name: the top-level `name`, else the caller's,
	// else the file name without its extension.
	Name string `json:"name"`
	// Source is the file the stack was read from; empty when built in code.
	Source string `json:"source,omitempty"`
	// Order lists the service names in file order.
	Order []string `json:"order"`
	// Services maps a service name to its definition.
	Services map[string]Service `json:"services"`

	// Warnings say what in the file loaded but does not mean what it
	// means in Compose (a key ignored, a variable not set), in file order.
	// Not serialised and not part of any revision.
	Warnings []Problem `json:"-"`

	// pos maps a key path (services.api.deploy.replicas) to where the
	// file wrote it, so validation errors can name file:line too. Not
	// serialised: a stack read back from the journal has no positions.
	pos positions

	// Volumes are the top-level named volumes (`volumes:`) by their key
	// in the file, node-wide names settled (volumes.go).
	Volumes map[string]Volume `json:"volumes,omitempty"`
}

// Service is one service of a stack, with every default applied.
type Service struct {
	// Name is the service's key in the stack file.
	Name string `json:"name"`
	// Command is the program and its arguments (`command`; the string form
	// is split like a shell does, without expansion). Empty with an image
	// means the image's own init.
	Command []string `json:"command,omitempty"`
	// Args are appended to Command (`args`).
	Args []string `json:"args,omitempty"`
	// Image is the image alias for container drivers (`image`).
	Image string `json:"image,omitempty"`
	// Env is the instance environment; values may be secret.
	Env Env `json:"env,omitempty"`
	// WorkingDir is an absolute path; empty means the driver's default.
	WorkingDir string `json:"working_dir,omitempty"`
	// User is "uid[:gid]" or "name[:group]"; empty is the daemon's own.
	User string `json:"user,omitempty"`
	// Ports are the TCP ports the service listens on, and which of them
	// the daemon's balancer publishes.
	Ports []Port `json:"ports,omitempty"`
	// Healthcheck is the probe; Kind ProbeNone when absent or disabled.
	Healthcheck Healthcheck `json:"healthcheck"`
	// DependsOn gates the service's start on other services (SVC-18).
	DependsOn []Dependency `json:"depends_on,omitempty"`
	Deploy    Deploy       `json:"deploy"`
	// Driver names the instance driver; default "process".
	Driver string `json:"driver"`
	// Hibernate is set for a service that sleeps when idle (ACT-*).
	Hibernate *Hibernate `json:"hibernate,omitempty"`
	// Sidecars are commands that run beside the service (ACT-11, ACT-12).
	Sidecars []Sidecar `json:"sidecars,omitempty"`
	// StopGracePeriod is how long Stop waits after SIGTERM before it
	// kills: default 10s, or 20s for a hibernating service (ACT-8).
	StopGracePeriod time.Duration `json:"stop_grace_period"`
	// Engenho holds the `x-engenho` knobs, defaults applied.
	Engenho Engenho `json:"x-engenho"`

	// Labels are the user's labels (`labels`), stored on every instance
	// beside engenho's own (SVC-3); no key starts with "engenho.".
	Labels map[string]string `json:"labels,omitempty"`
	// ContainerName is Compose's `container_name`: kept as the label
	// engenho.container_name on the one instance, never its name (the
	// instance name stays STACK-SERVICE-SLOT-ID, SVC-3).
	ContainerName string `json:"container_name,omitempty"`
	// Expose lists the ports (`expose`: "80", "8000-8010") the service
	// listens on without publishing. Recorded only: on the node's shared
	// network every listening port is already reachable from the node.
	Expose []string `json:"expose,omitempty"`
	// Profiles are the Compose profiles the service belongs to; empty
	// means always enabled. A parsed stack holds enabled services only.
	Profiles []string `json:"profiles,omitempty"`
	// Volumes are the service's named volumes and bind mounts
	// (`volumes`, volumes.go), in file order. Its sidecars share them.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Secrets are the files the instances (and sidecars) read secrets
	// from (Compose `secrets:`; secrets.go), in file order.
	Secrets []ServiceSecret `json:"secrets,omitempty"`
}

// Argv is the full command line of an instance: Command then Args.
func (s Service) Argv() []string {
	if len(s.Command) == 0 && len(s.Args) == 0 {
		return nil
	}
	argv := make([]string, 0, len(s.Command)+len(s.Args))
	argv = append(argv, s.Command...)
	return append(argv, s.Args...)
}

// Standalone reports whether the service has no instance of its own, only
// sidecars: a standalone worker (ACT-12).
func (s Service) Standalone() bool {
	return len(s.Command) == 0 && len(s.Args) == 0 && s.Image == ""
}

// EdgeHost is the host name the HTTP edge routes to this service
// (ACT-1): hibernate.host, else x-engenho.host, else "".
func (s Service) EdgeHost() string {
	if s.Hibernate != nil {
		return s.Hibernate.Host
	}
	return s.Engenho.Host
}

// Published returns the ports the balancer publishes (Published > 0).
func (s Service) Published() []Port {
	var out []Port
	for _, p := range s.Ports {
		if p.Published > 0 {
			out = append(out, p)
		}
	}
	return out
}

// String is a one-line summary. It never shows env values.
func (s Service) String() string {
	what := s.Image
	if argv := s.Argv(); len(argv) > 0 {
		what = strings.Join(argv, " ")
	}
	if s.Standalone() {
		what = fmt.Sprintf("%d sidecar(s)", len(s.Sidecars))
	}
	return fmt.Sprintf("%s: %s %q x%d rev %s", s.Name, s.Driver, what, s.Deploy.Replicas, s.Revision())
}

// Port is one TCP port of a service.
type Port struct {
	// Target is the port the workload listens on (inside the instance).
	// The process driver cannot remap: it tells the workload its host
	// port in $PORT, and Target is then the port's identity.
	Target int `json:"target"`
	// Published is the balancer's listen port; 0 means not published.
	Published int `json:"published,omitempty"`
	// HostIP is the balancer's listen address; "0.0.0.0" (all
	// interfaces, as in Compose) when published without one.
	HostIP string `json:"host_ip,omitempty"`
	// Protocol is always "tcp".
	Protocol string `json:"protocol"`
}

// ListenAddr is HostIP:Published in net.Dial form ("" when unpublished).
func (p Port) ListenAddr() string {
	if p.Published == 0 {
		return ""
	}
	if strings.Contains(p.HostIP, ":") {
		return fmt.Sprintf("[%s]:%d", p.HostIP, p.Published)
	}
	return fmt.Sprintf("%s:%d", p.HostIP, p.Published)
}

// ProbeKind is how a healthcheck probes an instance (SVC-7).
type ProbeKind string

const (
	// ProbeNone: no healthcheck; status "none", in rotation while running.
	ProbeNone ProbeKind = "none"
	// ProbeExec runs Exec inside the instance; exit 0 is healthy.
	ProbeExec ProbeKind = "exec"
	// ProbeHTTP GETs Path on Port; 2xx and 3xx are healthy.
	ProbeHTTP ProbeKind = "http"
	// ProbeTCP connects to Port.
	ProbeTCP ProbeKind = "tcp"
)

// Healthcheck is a service's probe and its timing (SVC-7). Timing fields
// carry their defaults even when Kind is ProbeNone.
type Healthcheck struct {
	Kind ProbeKind `json:"kind"`
	// Exec is the argv of an exec probe; CMD-SHELL "X" becomes
	// ["/bin/sh", "-c", "X"].
	Exec []string `json:"exec,omitempty"`
	// Path is the HTTP probe's request path, starting with "/".
	Path string `json:"path,omitempty"`
	// Port is the target port an http or tcp probe connects to; the
	// prober finds its address in the driver's Status.Addresses[Port].
	Port int `json:"port,omitempty"`
	// Interval between probes once started (default 10s).
	Interval time.Duration `json:"interval"`
	// Timeout of one probe (default 5s).
	Timeout time.Duration `json:"timeout"`
	// Retries is the number of consecutive failures that make the
	// instance unhealthy (default 3).
	Retries int `json:"retries"`
	// StartPeriod: failures during it do not count (default 0s).
	StartPeriod time.Duration `json:"start_period"`
	// StartInterval is the probe cadence while starting (default 2s).
	StartInterval time.Duration `json:"start_interval"`
}

// Enabled reports whether there is a probe to run.
func (h Healthcheck) Enabled() bool { return h.Kind != ProbeNone && h.Kind != "" }

// Deadline is how long a new instance has to become healthy during a
// rollout (SVC-13): max(start_period, 60s) + interval × retries + 30s.
func (h Healthcheck) Deadline() time.Duration {
	d := max(h.StartPeriod, 60*time.Second) + 30*time.Second
	if h.Enabled() && h.Retries > 0 {
		// Saturate instead of overflowing into a negative deadline.
		if h.Interval > (math.MaxInt64-d)/time.Duration(h.Retries) {
			return math.MaxInt64
		}
		d += h.Interval * time.Duration(h.Retries)
	}
	return d
}

// Dependency conditions (SVC-18).
const (
	ConditionStarted = "service_started"
	ConditionHealthy = "service_healthy"
)

// Dependency is one depends_on entry.
type Dependency struct {
	Service   string `json:"service"`
	Condition string `json:"condition"`
	// Restart is Compose's depends_on.X.restart: this service gets a new
	// revision whenever a deployment gives the dependency one (an update,
	// a redeploy), so it is replaced with it (runtime/daemon's
	// restartDependents).
	Restart bool `json:"restart,omitempty"`
	// Optional is Compose's required: false. A dependency on a service
	// that is not in the stack (or not enabled by a profile) is then
	// dropped with a warning instead of refused; one that is present gates
	// the start like any other.
	Optional bool `json:"optional,omitempty"`
}

// Deploy is the `deploy` block.
type Deploy struct {
	// Replicas occupy slots 1..Replicas (default 1; 0 keeps the service
	// defined with nothing running).
	Replicas      int           `json:"replicas"`
	RestartPolicy RestartPolicy `json:"restart_policy"`
	UpdateConfig  UpdateConfig  `json:"update_config"`
	Resources     Resources     `json:"resources"`
	// global: deploy.mode was global (one instance on this node); read
	// by the parse's last pass, never stored.
	global bool
}

// Restart policy conditions (SUP-16).
const (
	RestartNone      = "none"
	RestartOnFailure = "on-failure"
	RestartAny       = "any"
)

// RestartPolicy caps workload restarts (SUP-16). The backoff ladder
// (x-engenho.backoff) decides when; this decides whether.
type RestartPolicy struct {
	// Condition: "any" (default) restarts after every end, "on-failure"
	// only after a non-zero exit or a failed health, "none" never.
	Condition string `json:"condition"`
	// MaxAttempts caps restarts within Window; 0 means no cap.
	MaxAttempts int `json:"max_attempts"`
	// Window is the span MaxAttempts counts over; 0 means since the
	// replica's ledger was last reset by a stable window (SUP-11).
	Window time.Duration `json:"window"`
	// Delay is a floor under every restart wait: the ladder's wait is
	// max(Delay, ladder step). Default 0 (the ladder alone).
	Delay time.Duration `json:"delay"`
}

// Update orders and failure actions (SVC-12, SVC-13).
const (
	OrderStopFirst  = "stop-first"
	OrderStartFirst = "start-first"

	FailurePause    = "pause"
	FailureRollback = "rollback"
	FailureContinue = "continue"
)

// UpdateConfig drives rolling updates (SVC-12, SVC-13).
type UpdateConfig struct {
	// Parallelism is the batch size; 0 means all at once (default 1).
	Parallelism int `json:"parallelism"`
	// Delay between batches (default 0s).
	Delay time.Duration `json:"delay"`
	// Order is "stop-first" (default) or "start-first".
	Order string `json:"order"`
	// FailureAction is "pause" (default), "rollback" or "continue".
	FailureAction string `json:"failure_action"`
	// Monitor is how long a new instance must stay in rotation after it
	// turned healthy (default 5s).
	Monitor time.Duration `json:"monitor"`
}

// Resources are optional limits (`deploy.resources.limits`, the memory
// reservation, and their service-level spellings; parse_resources.go);
// zero is none.
type Resources struct {
	CPUs        float64 `json:"cpus,omitempty"`
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	// MemoryReservationBytes is kept under pressure (soft limit).
	MemoryReservationBytes int64 `json:"memory_reservation_bytes,omitempty"`
	// Pids caps processes and threads; 0 is none.
	Pids int64 `json:"pids,omitempty"`
}

// Replication classes of a hibernating service's checkpoints (ACT-9).
const (
	ReplicationStream  = "stream"
	ReplicationBatched = "batched"
	ReplicationDaily   = "daily"
)

// Hibernate makes a service run only while someone talks to it (ACT-*).
// A hibernating service has one instance (replicas 1) and is reached
// through the HTTP edge by Host, never through a published port.
type Hibernate struct {
	// Host is the DNS name the edge routes to this service; it also names
	// the service's lease and checkpoints in the object store.
	Host string `json:"host"`
	// Idle is how long without requests before it sleeps (default 15m).
	Idle time.Duration `json:"idle"`
	// Seed is run on a fresh first boot (no local or remote state) and
	// must succeed before anything serves (ACT-4). Empty: none.
	Seed []string `json:"seed,omitempty"`
	// Replication is the checkpoint cadence while awake: "stream",
	// "batched" (default) or "daily" (ACT-9).
	Replication string `json:"replication"`
	// DataDir is the absolute path of the state directory that parks in
	// the object store; empty lets the activator choose (it tells the
	// workload in $ENGENHO_DATA_DIR).
	DataDir string `json:"data_dir,omitempty"`
	// Port is the target port the edge proxies to (default: the first).
	Port int `json:"port,omitempty"`
	// WakeTimeout is how long a request waits for a wake before 503
	// (default 30s, ACT-3).
	WakeTimeout time.Duration `json:"wake_timeout"`
}

// Sidecar is a command that runs beside a service's instance, or alone
// for a standalone worker (ACT-11, ACT-12). It shares the service's
// driver, image, user and working directory, and its environment is the
// service's env with its own on top.
type Sidecar struct {
	// Name is unique within the service; it starts with a letter.
	Name    string   `json:"name"`
	Command []string `json:"command"`
	Env     Env      `json:"env,omitempty"`
	// WorkingDir overrides the service's.
	WorkingDir string `json:"working_dir,omitempty"`
	// AlwaysOn restarts it after any exit; otherwise, for a hibernating
	// service, exit 0 means its work is done (ACT-12).
	AlwaysOn bool `json:"always_on,omitempty"`
	// MaxRun recycles a run that lasts longer; 0 means no limit.
	MaxRun time.Duration `json:"max_run,omitempty"`
	// StopGracePeriod between SIGTERM and kill (default 5s, ACT-8).
	StopGracePeriod time.Duration `json:"stop_grace_period"`
	// Backoff after a dead sidecar (ACT-11).
	Backoff SidecarBackoff `json:"backoff"`
}

// SidecarBackoff is a doubling restart delay (ACT-11).
type SidecarBackoff struct {
	// Initial delay (default 2s), doubled after each failed run.
	Initial time.Duration `json:"initial"`
	// Cap on the delay (default 1m).
	Cap time.Duration `json:"cap"`
	// ResetAfter: a run this long resets the delay (default 1m).
	ResetAfter time.Duration `json:"reset_after"`
}

// Engenho holds a service's `x-engenho` knobs with defaults applied.
type Engenho struct {
	// Backoff is the restart ladder (SUP-10).
	Backoff Backoff `json:"backoff"`
	// Stable is the stability window that resets a ledger (SUP-11,
	// default 5m).
	Stable time.Duration `json:"stable"`
	// StepTimeout bounds one service step (SVC-11, default 2m).
	StepTimeout time.Duration `json:"step_timeout"`
	// UnhealthyThreshold is the consecutive unhealthy observations
	// before a restart (SUP-14, default 2).
	UnhealthyThreshold int `json:"unhealthy_threshold"`
	// RestartsBeforeReplace: unhealthy restarts without becoming healthy
	// before the replica is replaced by a fresh instance (SUP-15,
	// default 3).
	RestartsBeforeReplace int `json:"restarts_before_replace"`
	// Drain is how long a retiring instance's connections may drain
	// (SVC-16, default 10s).
	Drain time.Duration `json:"drain"`
	// UnhealthyEventAfter: a service that was healthy and has had no
	// healthy replica this long raises health.unhealthy (SVC-20,
	// default 20s).
	UnhealthyEventAfter time.Duration `json:"unhealthy_event_after"`
	// Host routes the HTTP edge to a non-hibernating service (ACT-1).
	Host string `json:"host,omitempty"`
	// Secrets is what a changed secret value does (secrets.on_change).
	Secrets SecretsPolicy `json:"secrets"`
	// Rollout is the rollout strategy as written (`x-engenho.rollout`):
	// RolloutRolling, RolloutRecreate, or empty when not written (then
	// Service.Strategy derives it from update_config, SVC-25).
	Rollout string `json:"rollout,omitempty"`
}

// Backoff is the restart ladder (SUP-10): the first Immediate consecutive
// failures are retried at once, the next ones wait Delays in turn, every
// later one waits Cap.
type Backoff struct {
	Immediate int             `json:"immediate"`
	Delays    []time.Duration `json:"delays"`
	Cap       time.Duration   `json:"cap"`
	// Jitter is a fraction in [0, 1]: a wait d becomes a random value in
	// [d×(1-Jitter), d×(1+Jitter)]. 0 (default) is off, so tests are exact.
	Jitter float64 `json:"jitter,omitempty"`
	// Declared: the file has x-engenho.backoff, so it also paces the
	// restarts of the service's own actors, instead of the daemon's
	// supervision.ladder (SUP-20).
	Declared bool `json:"declared,omitempty"`
}

// Delay is the wait before the retry that follows the failures-th
// consecutive failure (1-based), without jitter. With the defaults:
// failures 1..3 → 0, 4 → 1m, 5 → 2m, 6 → 4m, 7 → 8m, 8 and later → 15m.
func (b Backoff) Delay(failures int) time.Duration {
	if failures <= b.Immediate {
		return 0
	}
	i := failures - b.Immediate - 1
	if i < len(b.Delays) {
		return min(b.Delays[i], b.Cap)
	}
	return b.Cap
}
