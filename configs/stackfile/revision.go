package stackfile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

func formatCPUs(c float64) string {
	if c == 0 {
		return ""
	}
	return strconv.FormatFloat(c, 'g', -1, 64)
}

// revisionFormat versions the hashed input. Changing what goes into a
// revision changes every revision, and so replaces every instance on the
// node after an upgrade: bump it only on purpose (TestRevisionGolden).
const revisionFormat = 1

// revisionInput is what defines an instance (SVC-3). Left out on purpose,
// because changing them must not replace running instances:
//   - deploy.replicas: a change is a scale, not an update (SVC-4);
//   - deploy.restart_policy, deploy.update_config, x-engenho (ladder,
//     windows, thresholds, drain, the rollout strategy), stop_grace_period,
//     depends_on: they steer the supervisor, not the instance, and apply
//     in place (a change of rollout strategy alone replaces nothing: it
//     steers the next rollout, SVC-25);
//   - the published side of ports (published, host_ip): it belongs to the
//     balancer, which re-binds without touching replicas;
//   - hibernate settings (host, idle, seed, replication, ...): they steer
//     the activator; only whether the service hibernates is in;
//   - sidecars: each has its own revision (SidecarRevision).
//
// In, besides the obvious (argv, image, env, user, working_dir, driver,
// target ports, resources, the mounts of volumes and binds): the healthcheck, so that a new probe is rolled
// out like a new binary, one batch at a time with failure_action guarding
// it, instead of judging every running instance by a probe never tried.
type revisionInput struct {
	V          int               `json:"v"`
	Driver     string            `json:"driver"`
	Argv       []string          `json:"argv,omitempty"`
	Image      string            `json:"image,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	User       string            `json:"user,omitempty"`
	Targets    []int             `json:"targets,omitempty"`
	Health     *revisionHealth   `json:"health,omitempty"`
	CPUs       string            `json:"cpus,omitempty"`
	Memory     int64             `json:"memory,omitempty"`
	Hibernates bool              `json:"hibernates,omitempty"`
	// Left out when zero, so revisions written before they existed stay.
	MemoryReservation int64 `json:"memory_reservation,omitempty"`
	Pids              int64 `json:"pids,omitempty"`
	// Labels and container_name are stored on the instance (the latter as
	// the label engenho.container_name), so a change replaces it.
	Labels        map[string]string `json:"labels,omitempty"`
	ContainerName string            `json:"container_name,omitempty"`
	// Mounts are what the instance sees of volumes and binds, sorted by
	// target (file order does not matter).
	Mounts []revisionMount `json:"mounts,omitempty"`
	// Secrets: each file's target and mode, and the value's digest when
	// x-engenho.secrets.on_change is restart.
	Secrets []revisionSecret `json:"secrets,omitempty"`
}

type revisionMount struct {
	Type     string `json:"type"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"ro,omitempty"`
}

func revisionMounts(s Service) []revisionMount {
	var out []revisionMount
	for _, m := range s.Mounts() {
		out = append(out, revisionMount{Type: m.Type, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	return out
}

type revisionHealth struct {
	Kind          ProbeKind `json:"kind"`
	Exec          []string  `json:"exec,omitempty"`
	Path          string    `json:"path,omitempty"`
	Port          int       `json:"port,omitempty"`
	Interval      string    `json:"interval"`
	Timeout       string    `json:"timeout"`
	Retries       int       `json:"retries"`
	StartPeriod   string    `json:"start_period"`
	StartInterval string    `json:"start_interval"`
}

// Revision is a short hash (12 hex digits) of what defines the service's
// instances; see revisionInput for what is in and why. Equal definitions
// give equal revisions, however they were written (map or list env,
// string or list command, defaults written out or not, key order).
//
// Secret env values are in the hash, so rotating a secret rolls the
// instances: once the stack is bound to the node key (BindSecrets, as the
// daemon does with every stack), as the key's HMAC of the value, so a
// revision shown in status cannot be used to test guesses of even a short
// secret (SEC-2). Unbound (a stack parsed and not yet bound), the value
// itself is hashed.
func (s Service) Revision() string {
	in := revisionInput{
		V:          revisionFormat,
		Driver:     s.Driver,
		Argv:       s.Argv(),
		Image:      s.Image,
		Env:        s.Env.revisionValues(),
		WorkingDir: s.WorkingDir,
		User:       s.User,
		CPUs:       formatCPUs(s.Deploy.Resources.CPUs),
		Memory:     s.Deploy.Resources.MemoryBytes,
		Hibernates: s.Hibernate != nil,

		MemoryReservation: s.Deploy.Resources.MemoryReservationBytes,
		Pids:              s.Deploy.Resources.Pids,
		Labels:            s.Labels,
		ContainerName:     s.ContainerName,
		Mounts:            revisionMounts(s),
		Secrets:           revisionSecrets(s.Secrets, s.Engenho.Secrets),
	}
	for _, p := range s.Ports {
		in.Targets = append(in.Targets, p.Target)
	}
	if hc := s.Healthcheck; hc.Enabled() {
		in.Health = &revisionHealth{
			Kind: hc.Kind, Exec: hc.Exec, Path: hc.Path, Port: hc.Port,
			Interval: hc.Interval.String(), Timeout: hc.Timeout.String(), Retries: hc.Retries,
			StartPeriod: hc.StartPeriod.String(), StartInterval: hc.StartInterval.String(),
		}
	}
	return hashJSON(in)
}

// sidecarRevisionInput is what defines a sidecar's instance: its command
// and environment and what it inherits from the service. The supervision
// knobs (always_on, max_run, backoff, stop grace) apply in place.
type sidecarRevisionInput struct {
	V          int               `json:"v"`
	Driver     string            `json:"driver"`
	Command    []string          `json:"command"`
	Image      string            `json:"image,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	User       string            `json:"user,omitempty"`
	Mounts     []revisionMount   `json:"mounts,omitempty"`
	// Secrets: the service's, which the sidecar sees too.
	Secrets []revisionSecret `json:"secrets,omitempty"`
}

// SidecarRevision is the revision of sidecar sc of s.
func (s Service) SidecarRevision(sc Sidecar) string {
	env := map[string]string{}
	for _, layer := range []Env{s.Env, sc.Env} {
		for k, v := range layer {
			env[k] = v.revisionValue()
		}
	}
	wd := s.WorkingDir
	if sc.WorkingDir != "" {
		wd = sc.WorkingDir
	}
	return hashJSON(sidecarRevisionInput{
		V: revisionFormat, Driver: s.Driver, Command: sc.Command, Image: s.Image,
		Env: env, WorkingDir: wd, User: s.User, Mounts: revisionMounts(s),
		Secrets: revisionSecrets(s.Secrets, s.Engenho.Secrets),
	})
}

// hashJSON hashes v's JSON; encoding/json sorts map keys, so the bytes
// depend only on the value.
func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only strings and ints go in, so this does not happen; never
		// panic on a definition all the same.
		b = fmt.Appendf(nil, "%#v", v)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
