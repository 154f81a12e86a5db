package process

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
)

// EnvRunToken is set in every run's environment to that run's token.
const EnvRunToken = "ENGENHO_RUN_TOKEN"

func newRunToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recordLaunch saves, before a run is spawned, that it is about to be:
// with its token, its start time and its host ports. in.mu must be held.
func (d *Driver) recordLaunch(in *instance, token string, hostPorts map[int]int) error {
	in.rec.RunToken, in.rec.Launching, in.rec.LaunchedAt = token, true, d.clk.Now()
	in.rec.HostPorts = hostPorts
	return in.persist(in.snapshot())
}

// adoptLaunch looks for the run of a record left Launching: spawned by a
// daemon that died before it recorded the run. Found, it is adopted like
// any run left running; else the launch never happened.
func (d *Driver) adoptLaunch(in *instance) (bool, error) {
	rec := in.rec
	rec.Launching = false
	adopted, err := d.adoptRun(in, d.findRun(rec.RunToken))
	if serr := rec.save(in.dir); serr != nil {
		d.log.Error().Err(serr).Str("instance", in.name).Msg("cannot record the launch's outcome")
	}
	return adopted, err
}

func (d *Driver) adoptRun(in *instance, run tokenRun) (bool, error) {
	if run.pid == 0 {
		return false, nil
	}
	if ok, err := d.attach(in, run.pid, run.start); err != nil || !ok {
		return false, err
	}
	rec := in.rec
	rec.Running, rec.Pid, rec.ProcStart, rec.StartedAt = true, run.pid, run.start, rec.LaunchedAt
	rec.ExitCode, rec.Signal = 0, ""
	return true, nil
}

// attach makes the process pid, started at start, in's current run when it
// is still that process (DRV-4): a run an earlier daemon left.
func (d *Driver) attach(in *instance, pid int, start uint64) (bool, error) {
	p, ok, err := d.r.adopt(pid, start, d.onExit(in, in.run+1))
	if err != nil || !ok {
		return false, err
	}
	in.run++
	in.proc, in.runDone = p, make(chan struct{})
	return true, nil
}

// tokenRun is a live run found by its token: its pid and /proc start time.
type tokenRun struct {
	pid   int
	start uint64
}

// findRun returns the run whose environment holds token as EnvRunToken,
// the zero tokenRun if there is none. /proc is read once per load, on the
// first launch left unrecorded.
func (d *Driver) findRun(token string) tokenRun {
	if token == "" {
		return tokenRun{}
	}
	if d.runs == nil {
		d.runs = runsByToken()
	}
	return d.runs[token]
}

// runsByToken maps each live run's token to the run. The run's children
// inherit the token; the run itself leads its process group.
func runsByToken() map[string]tokenRun {
	out := map[string]tokenRun{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	prefix := []byte(EnvRunToken + "=")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			token, ok := bytes.CutPrefix(kv, prefix)
			if !ok {
				continue
			}
			if start, leads := groupLeaderStart(pid); leads {
				out[string(token)] = tokenRun{pid: pid, start: start}
			}
		}
	}
	return out
}
