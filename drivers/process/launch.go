package process

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// EnvRunToken is set in every run's environment to that run's token.
const EnvRunToken = "ENGENHO_RUN_TOKEN"

func newRunToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Every run is announced on disk before it is spawned (DRV-4), so a
// daemon that dies between the spawn and the record leaves a run the next
// Driver finds by its token. On the restart path the announcement costs
// nothing: each run's record (and the instance's creation) already names
// the token of the run after it (NextToken), so a restart whose host ports
// are those on disk is spawned at once (launchToken). Otherwise, a first
// start with a port picked anew or a NextToken not yet on disk, the launch
// is saved first (recordLaunch).

// launchToken is the token for in's next run, and whether its launch is
// already announced on disk: the record on disk names it as NextToken and
// holds the host ports the run gets. in.mu must be held.
func (in *instance) launchToken(hostPorts map[int]int) (string, bool) {
	next := in.rec.NextToken
	if next == "" || next == in.rec.RunToken {
		return newRunToken(), false
	}
	onDisk := in.saved.Load() >= in.armedAt
	return next, onDisk && maps.Equal(hostPorts, in.rec.HostPorts)
}

// arm picks the token of the run after the current one; the next save
// announces it. in.mu must be held.
func (in *instance) arm() {
	in.rec.NextToken = newRunToken()
	in.armedAt = in.version + 1 // the next snapshot's version
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
	adopted, err := d.adoptRun(in, d.findRunOf(in, rec.RunToken))
	if serr := rec.save(in.dir); serr != nil {
		d.log.Error().Err(serr).Str("instance", in.name).Msg("cannot record the launch's outcome")
	}
	return adopted, err
}

// adoptArmed looks for a run carrying in's NextToken: a restart spawned
// with no write before it (launchToken) by a daemon that died before it
// recorded the run. Found, it is adopted as the current run and saved
// with a new NextToken.
func (d *Driver) adoptArmed(in *instance) (bool, error) {
	rec := in.rec
	next := rec.NextToken
	if next == "" || next == rec.RunToken {
		return false, nil
	}
	run := d.findRunOf(in, next)
	if run.pid == 0 {
		return false, nil
	}
	rec.LaunchedAt = d.clk.Now()
	adopted, err := d.adoptRun(in, run)
	if err != nil || !adopted {
		return false, err
	}
	rec.RunToken, rec.Launching, rec.Reason = next, false, ""
	rec.NextToken = newRunToken()
	if err := rec.save(in.dir); err != nil {
		// The new NextToken is not on disk: the next launch is saved first.
		in.armedAt = in.version + 1
		d.log.Error().Err(err).Str("instance", in.name).Msg("cannot record the adopted run")
	}
	return true, nil
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
	p, ok, err := d.r.adopt(pid, start, in.cg, d.onExit(in, in.run+1))
	if err != nil || !ok {
		return false, err
	}
	in.run++
	in.proc, in.runDone = p, make(chan struct{})
	return true, nil
}

// tokenRun is a run found by its token: its leader's pid and /proc start
// time (zero when the leader is gone), and every live process that
// carries the token (the leader, and what it started).
type tokenRun struct {
	pid     int
	start   uint64
	members []int
}

// findRun returns the run whose environment holds token as EnvRunToken,
// the zero tokenRun if there is none. /proc is read once per load, on the
// first launch left unrecorded or run found ended.
func (d *Driver) findRun(token string) tokenRun {
	if token == "" {
		return tokenRun{}
	}
	if d.runs == nil {
		d.runs = runsByToken()
	}
	return d.runs[token]
}

// findRunOf finds in's run that carries token: among its cgroup's
// processes when it has one (DRV-15), else in all of /proc.
func (d *Driver) findRunOf(in *instance, token string) tokenRun {
	if in.cg == nil || token == "" {
		return d.findRun(token)
	}
	pids, err := in.cg.Procs()
	if err != nil {
		return d.findRun(token)
	}
	var run tokenRun
	for _, pid := range pids {
		if got, ok := tokenOf(pid); ok && got == token {
			run = addMember(run, pid)
		}
	}
	return run
}

// addMember adds pid to run; the run's leader is the earliest started of
// its members that lead a process group of their own (it started before
// anything it started that made a group, with setsid or setpgid).
func addMember(run tokenRun, pid int) tokenRun {
	run.members = append(run.members, pid)
	if start, leads := groupLeaderStart(pid); leads && (run.pid == 0 || start < run.start) {
		run.pid, run.start = pid, start
	}
	return run
}

// runsByToken maps each token found in a live process's environment to
// its run. The run's children inherit the token; the run itself leads its
// process group.
func runsByToken() map[string]tokenRun {
	out := map[string]tokenRun{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		token, ok := tokenOf(pid)
		if !ok {
			continue
		}
		out[token] = addMember(out[token], pid)
	}
	return out
}

// tokenOf returns the EnvRunToken in pid's environment.
func tokenOf(pid int) (string, bool) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", false
	}
	prefix := []byte(EnvRunToken + "=")
	for _, kv := range bytes.Split(env, []byte{0}) {
		if token, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(token), true
		}
	}
	return "", false
}

// killLeftovers kills what is left of a run whose leader (pid pgid) ended
// while no driver watched it: the processes it started that are still in
// its process group. Without this they would live on, orphaned, holding
// the slot's port or files. The group is signalled by number, and only
// while a process of the run proves the number is still the run's group:
// one that, with a pidfd open on it (so it cannot be swapped for another
// under the same pid), is alive, in the group and carries the run's
// token. That kills members that cleared their environment too.
// Processes that left the group (setsid) are kept, as for a run that ends
// under a driver.
func (d *Driver) killLeftovers(name string, pgid int, token string) {
	if pgid <= 0 || token == "" {
		return
	}
	for _, pid := range d.findRun(token).members {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		got, ok := tokenOf(pid)
		member := ok && got == token && processGroup(pid) == pgid && !exited(fd)
		if member {
			unix.Kill(-pgid, unix.SIGKILL)
			d.log.Info().Str("instance", name).Int("pgid", pgid).Int("member", pid).
				Msg("killed what was left of a run that ended while no driver watched it")
		}
		unix.Close(fd)
		if member {
			return
		}
	}
}
