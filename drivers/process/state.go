package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/engenho/engenho/drivers"
)

// record is an instance's state file, DIR/instances/NAME/state.json. It
// holds the spec (labels included, so List finds the instance after any
// restart) and, while it runs, the pid and the process start time that
// together identify the run (DRV-4).
type record struct {
	Spec      drivers.Spec `json:"spec"`
	Running   bool         `json:"running"`
	Pid       int          `json:"pid,omitempty"`
	ProcStart uint64       `json:"proc_start,omitempty"` // /proc/PID/stat starttime (ticks)
	StartedAt time.Time    `json:"started_at,omitzero"`
	// HostPorts maps target to the host port of the current or last run
	// (a spec HostPort of 0 is given a free port at start).
	HostPorts map[int]int `json:"host_ports,omitempty"`
	ExitCode  int         `json:"exit_code"`
	Signal    string      `json:"signal,omitempty"`
	// Reason is the last exit's reason, when the driver knows better than
	// the code or signal (an OOM kill, DRV-14).
	Reason string `json:"reason,omitempty"`
	// RunToken marks the current or last run: its environment carries it
	// as ENGENHO_RUN_TOKEN. Launching is saved, with the token, before the
	// run is spawned and cleared when the run is recorded: a daemon that
	// dies in between leaves Launching set, and the next Driver finds the
	// run by its token instead of starting a second one beside it.
	RunToken   string    `json:"run_token,omitempty"`
	Launching  bool      `json:"launching,omitempty"`
	LaunchedAt time.Time `json:"launched_at,omitzero"`
	// NextToken is the token the next run will carry, saved ahead of its
	// launch (with the instance's creation, then with each run): a
	// restart whose host ports have not changed is spawned at once, with
	// no write before it, and a daemon that dies before recording it
	// leaves a live process carrying NextToken, which the next Driver
	// finds and adopts as it does a Launching one.
	NextToken string `json:"next_token,omitempty"`
	// SealedEnv holds the values of Spec.SecretEnv sealed with the
	// driver's Sealer (SEC-2); on disk, Spec.Env leaves them out. In
	// memory Spec.Env has them in plaintext for the next start.
	SealedEnv map[string]string `json:"sealed_env,omitempty"`
	// Cgroup is the instance's cgroup, relative to each hierarchy's
	// mount (DRV-12), while it has one; adoption finds its processes
	// there (DRV-15). OOMKills is the cgroup's OOM counter as of the last
	// run's end, so the next end tells an OOM kill of its own (DRV-14).
	Cgroup   string `json:"cgroup,omitempty"`
	OOMKills uint64 `json:"oom_kills,omitempty"`
	// SealedSecrets holds the values of Spec.Secrets sealed with the
	// driver's Sealer, by file name; on disk Spec.Secrets has no values.
	SealedSecrets map[string]string `json:"sealed_secrets,omitempty"`
}

const stateFile = "state.json"

// secretLabel binds a sealed env value to its variable's name.
func secretLabel(key string) string { return "env:" + key }

// sealSecrets seals the values of rec.Spec.SecretEnv into rec.SealedEnv.
func (d *Driver) sealSecrets(rec *record) error {
	if err := d.sealSecretFiles(rec); err != nil {
		return err
	}
	if len(rec.Spec.SecretEnv) == 0 {
		return nil
	}
	if d.opts.Sealer == nil {
		return errors.New("the spec has secret env values and this driver has no sealer to keep them (SEC-2)")
	}
	rec.SealedEnv = make(map[string]string, len(rec.Spec.SecretEnv))
	for _, k := range rec.Spec.SecretEnv {
		s, err := d.opts.Sealer.Seal(secretLabel(k), rec.Spec.Env[k])
		if err != nil {
			return fmt.Errorf("sealing secret env %s: %w", k, err)
		}
		rec.SealedEnv[k] = s
	}
	return nil
}

// openSecrets puts the plaintext of rec.SealedEnv back into rec.Spec.Env.
func (d *Driver) openSecrets(rec *record) error {
	if err := d.openSecretFiles(rec); err != nil {
		return err
	}
	if len(rec.Spec.SecretEnv) == 0 {
		return nil
	}
	if d.opts.Sealer == nil {
		return errors.New("the state file has sealed secret env values and this driver has no sealer to open them")
	}
	if rec.Spec.Env == nil {
		rec.Spec.Env = map[string]string{}
	}
	for _, k := range rec.Spec.SecretEnv {
		sealed, ok := rec.SealedEnv[k]
		if !ok {
			return fmt.Errorf("secret env %s has no sealed value", k)
		}
		v, err := d.opts.Sealer.Open(secretLabel(k), sealed)
		if err != nil {
			return fmt.Errorf("secret env %s: %w", k, err)
		}
		rec.Spec.Env[k] = v
	}
	return nil
}

// onDisk is r as its state file holds it: secret values only sealed.
func (r *record) onDisk() *record {
	if len(r.Spec.SecretEnv) == 0 && len(r.Spec.Secrets) == 0 {
		return r
	}
	out := *r
	out.Spec.Secrets = withoutSecretValues(r.Spec.Secrets)
	out.Spec.Env = maps.Clone(r.Spec.Env)
	for _, k := range r.Spec.SecretEnv {
		delete(out.Spec.Env, k)
	}
	return &out
}

// save writes r atomically (temp file + rename), its secret values only
// sealed. It does not fsync: the file has to survive the daemon dying,
// not the machine, and after a machine crash no workload is running
// anyway.
func (r *record) save(dir string) error {
	b, err := json.Marshal(r.onDisk())
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

func loadRecord(dir string) (*record, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, &damagedRecord{path: filepath.Join(dir, stateFile), reason: err.Error()}
	}
	return &r, nil
}

// damagedRecord is a state file that exists but cannot be read as the
// instance's record (REL-5).
type damagedRecord struct {
	path, reason string
}

func (e *damagedRecord) Error() string { return "state file " + e.path + " is damaged: " + e.reason }

// persist writes snap, version v of the instance's record, unless a newer
// version is already on disk or the instance was deleted. Writes happen
// under saveMu, never under in.mu, so the exit path can hand its write to
// a goroutine without holding up a restart, and an older snapshot never
// overwrites a newer one.
func (in *instance) persist(snap record, v uint64) error {
	in.saveMu.Lock()
	defer in.saveMu.Unlock()
	if in.gone || v <= in.saved.Load() {
		return nil
	}
	if err := snap.save(in.dir); err != nil {
		return err
	}
	in.saved.Store(v)
	return nil
}

// snapshot bumps the record's version and copies it; in.mu must be held.
func (in *instance) snapshot() (record, uint64) {
	in.version++
	return *in.rec, in.version
}
