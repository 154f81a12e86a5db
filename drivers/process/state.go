package process

import (
	"encoding/json"
	"fmt"
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
	// RunToken marks the current or last run: its environment carries it
	// as ENGENHO_RUN_TOKEN. Launching is saved, with the token, before the
	// run is spawned and cleared when the run is recorded: a daemon that
	// dies in between leaves Launching set, and the next Driver finds the
	// run by its token instead of starting a second one beside it.
	RunToken   string    `json:"run_token,omitempty"`
	Launching  bool      `json:"launching,omitempty"`
	LaunchedAt time.Time `json:"launched_at,omitzero"`
}

const stateFile = "state.json"

// save writes r atomically (temp file + rename). It does not fsync: the
// file has to survive the daemon dying, not the machine, and after a
// machine crash no workload is running anyway.
func (r *record) save(dir string) error {
	b, err := json.Marshal(r)
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
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return &r, nil
}

// persist writes snap, version v of the instance's record, unless a newer
// version is already on disk or the instance was deleted. Writes happen
// under saveMu, never under in.mu, so the exit path can hand its write to
// a goroutine without holding up a restart, and an older snapshot never
// overwrites a newer one.
func (in *instance) persist(snap record, v uint64) error {
	in.saveMu.Lock()
	defer in.saveMu.Unlock()
	if in.gone || v <= in.saved {
		return nil
	}
	if err := snap.save(in.dir); err != nil {
		return err
	}
	in.saved = v
	return nil
}

// snapshot bumps the record's version and copies it; in.mu must be held.
func (in *instance) snapshot() (record, uint64) {
	in.version++
	return *in.rec, in.version
}
