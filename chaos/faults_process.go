package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/schedule"
	"github.com/engenho/engenho/messages"
	"golang.org/x/sys/unix"
)

// injectWorkloadStop SIGSTOPs one running replica of a service whose probe
// fails when its workload hangs: alive, but answering nothing. The probe
// must find it unhealthy and the replica be restarted (a stopped process
// still dies of the SIGKILL that ends its stop grace). With cont=1 the
// campaign sends SIGCONT once the restart has begun, as a process that
// unfreezes on its own would.
func (c *campaign) injectWorkloadStop(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	victim, err := c.pickVictim(f, before, "process", inj)
	if err != nil {
		return err
	}
	inj.detail = fmt.Sprintf("%s pid %d stopped (SIGSTOP)", victim.Name, victim.Pid)
	if err := syscall.Kill(victim.Pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %d: %w", victim.Pid, err)
	}
	inj.witness = func(o observation) bool {
		r, ok := o.replica(victim.Name)
		restarted := !ok || !r.StartedAt.Equal(victim.StartedAt)
		if restarted && f.Param("cont") == 1 {
			_ = syscall.Kill(victim.Pid, syscall.SIGCONT) // gone already, or dies of its kill
		}
		return restarted
	}
	// Never leave a process frozen behind: the stop may have been lost
	// with a daemon, and the orphan check would then blame the campaign.
	inj.cleanup = func(context.Context) string {
		_ = syscall.Kill(victim.Pid, syscall.SIGCONT)
		return ""
	}
	return nil
}

// injectDaemonStop SIGSTOPs node a's daemon for stop_ms, then SIGCONTs
// it. Its workloads run on meanwhile (SUP-9: an actor pause is not a
// workload restart); after it the daemon catches up with whatever its
// timers missed and must restart nothing healthy.
func (c *campaign) injectDaemonStop(ctx context.Context, f schedule.Fault, inj *injected) error {
	pid := c.a.currentPid()
	inj.target = "daemon of node " + c.a.name
	d := time.Duration(f.Param("stop_ms")) * time.Millisecond
	inj.detail = fmt.Sprintf("pid %d stopped for %s", pid, d)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %d: %w", pid, err)
	}
	err := sleep(ctx, d)
	if cerr := syscall.Kill(pid, syscall.SIGCONT); cerr != nil {
		return fmt.Errorf("SIGCONT %d: %w", pid, cerr)
	}
	return err
}

// injectFDLimit lowers node a's daemon's open-file limit (prlimit) to the
// files it holds plus slack, opens enough control connections to use up
// the slack and more, holds that for hold_ms, then closes them and gives
// the limit back. The daemon must not exit, must keep its workloads
// (nothing healthy is restarted) and must serve again afterwards.
func (c *campaign) injectFDLimit(ctx context.Context, f schedule.Fault, inj *injected) error {
	pid := c.a.currentPid()
	inj.target = "daemon of node " + c.a.name
	held, err := openFiles(pid)
	if err != nil {
		return err
	}
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		return fmt.Errorf("reading the open-file limit of %d: %w", pid, err)
	}
	low := uint64(held + f.Param("slack"))
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: low, Max: old.Max}, nil); err != nil {
		return fmt.Errorf("lowering the open-file limit of %d: %w", pid, err)
	}
	conns := dialMany(c.a.socket(), 2*f.Param("slack")+8)
	refused := 0
	for _, cn := range conns {
		if cn == nil {
			refused++
		}
	}
	err = sleep(ctx, time.Duration(f.Param("hold_ms"))*time.Millisecond)
	for _, cn := range conns {
		if cn != nil {
			_ = cn.Close()
		}
	}
	if rerr := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil); rerr != nil {
		return fmt.Errorf("restoring the open-file limit of %d: %w", pid, rerr)
	}
	inj.detail = fmt.Sprintf("pid %d held %d files, limit %d for %dms, %d connections (%d refused)", pid, held, low,
		f.Param("hold_ms"), len(conns), refused)
	if !c.a.alive() {
		return fmt.Errorf("the daemon exited with its files used up (see %s)", c.a.logPath())
	}
	return err
}

// openFiles counts the open files of pid.
func openFiles(pid int) (int, error) {
	entries, err := readDirNames(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("counting the open files of %d: %w", pid, err)
	}
	return len(entries), nil
}

// injectOOM makes one replica of a service with a memory limit allocate
// past it through its own port (demo-http's /alloc, enabled by
// DEMO_ALLOW_ALLOC): the kernel kills it in its cgroup, and the replica
// must come back, its last error naming the OOM kill (DRV-14).
func (c *campaign) injectOOM(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	victim, err := c.pickVictim(f, before, "process", inj)
	if err != nil {
		return err
	}
	r, ok := before.replica(victim.Name)
	addr := r.Addresses[80] // shop/web's target port
	if !ok || addr == "" {
		return errSkip{"no address for " + victim.Name}
	}
	url := fmt.Sprintf("http://%s/alloc?mib=%d", addr, oomMiB)
	resp, err := askToAllocate(ctx, url)
	if refused(err) {
		return errSkip{victim.Name + " does not listen yet: " + err.Error()}
	}
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return fmt.Errorf("%s allocated %d MiB over its %s limit and lived", victim.Name, oomMiB, webMemory)
		}
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	inj.detail = fmt.Sprintf("%s pid %d asked for %d MiB (limit %s)", victim.Name, victim.Pid, oomMiB, webMemory)
	inj.witness = func(o observation) bool {
		r, ok := o.replica(victim.Name)
		return !ok || !r.StartedAt.Equal(victim.StartedAt)
	}
	inj.cleanup = func(ctx context.Context) string {
		told, note := c.oomSeen(ctx, victim.Name)
		if !told {
			inj.violations = append(inj.violations, invariant.Violation{Invariant: invariant.FaultEffect, Subject: inj.target, Evidence: note})
		}
		return note
	}
	return nil
}

// askToAllocate sends the allocation request, again while the workload
// refuses the connection: a replica the scale before the fault just
// started may not listen yet (seed 424242's fault 118 took such a refusal
// for the OOM kill). An error once it was connected is the kill.
func askToAllocate(ctx context.Context, url string) (*http.Response, error) {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(actx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if !refused(err) || sleep(actx, 200*time.Millisecond) != nil {
			return resp, err
		}
	}
}

// refused says whether the request never reached the workload: the
// connection was not made (nothing listened, or time ran out dialing).
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// oomMiB is what workload.oom asks shop/web to allocate: well over its
// limit, so the kernel kills it on the way.
const oomMiB = 256

// oomSeen says whether the OOM kill of instance was reported as such
// (DRV-14): a replica.failed event names it.
func (c *campaign) oomSeen(ctx context.Context, instance string) (bool, string) {
	evs, err := c.a.events(ctx, 300)
	if err != nil {
		return true, "events unreadable: " + err.Error() // not the daemon's failure to tell
	}
	for _, ev := range evs {
		if ev.Instance == instance && ev.Kind == messages.KindReplicaFailed && containsOOM(ev.Message) {
			return true, "reported: " + ev.Message
		}
	}
	return false, "the OOM kill of " + instance + " was not reported as oom-killed (DRV-14)"
}

// dialMany opens n connections to a control socket and asks status on
// each, so the daemon accepts them and holds a file per connection; a
// connection that could not be made is nil.
func dialMany(socket string, n int) []net.Conn {
	out := make([]net.Conn, n)
	for i := range out {
		conn, err := net.DialTimeout("unix", socket, time.Second)
		if err != nil {
			continue
		}
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := fmt.Fprintf(conn, "{\"id\":%d,\"op\":\"status\"}\n", i+1); err != nil {
			_ = conn.Close()
			continue
		}
		out[i] = conn
	}
	return out
}

// readDirNames lists a directory's names.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// containsOOM says whether a failure message names an OOM kill (DRV-14).
func containsOOM(msg string) bool { return strings.Contains(msg, "oom-killed") }

// injectCompound injects the parts of a compound fault one right after the
// other (several faults at once, REL-4): the node must recover from all of
// them together, every part's effect must show, and only the slots some
// part aims at may change.
func (c *campaign) injectCompound(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	var witnesses []func(observation) bool
	var cleanups []func(context.Context) string
	var done []string
	killedAt := lastDaemonKill(f.Parts)
	for i, part := range f.Parts {
		part = c.resolve(part)
		sub := &injected{}
		err := c.inject(ctx, part, before, sub)
		var skip errSkip
		switch {
		case errors.As(err, &skip):
			done = append(done, fmt.Sprintf("%s skipped (%s)", part.Kind, skip.reason))
			continue
		case err != nil:
			inj.detail = strings.Join(done, "; ")
			return fmt.Errorf("%s: %w", part.Kind, err)
		}
		what := fmt.Sprintf("%s %s (%s)", part.Kind, sub.target, sub.detail)
		inj.touched = append(inj.touched, sub.touched...)
		inj.acks = append(inj.acks, sub.acks...)
		inj.violations = append(inj.violations, sub.violations...)
		switch {
		case sub.witness == nil:
		case i < killedAt && livesInTheDaemon(part.Kind):
			what += " (its effect may die with the daemon killed after it)"
		default:
			witnesses = append(witnesses, latched(sub.witness))
		}
		done = append(done, what)
		if sub.cleanup != nil {
			cleanups = append(cleanups, sub.cleanup)
		}
	}
	if len(witnesses) == 0 && len(cleanups) == 0 && len(done) == len(f.Parts) && allSkipped(done) {
		return errSkip{"every part was skipped"}
	}
	inj.target, inj.detail = "node "+c.a.name, strings.Join(done, "; ")
	if len(witnesses) > 0 {
		inj.witness = func(o observation) bool {
			for _, w := range witnesses {
				if !w(o) {
					return false
				}
			}
			return true
		}
	}
	inj.cleanup = func(ctx context.Context) string {
		var notes []string
		for _, cl := range cleanups {
			if n := cl(ctx); n != "" {
				notes = append(notes, n)
			}
		}
		return strings.Join(notes, "; ")
	}
	return nil
}

// lastDaemonKill is the index of the last part that SIGKILLs the daemon,
// -1 when none does.
func lastDaemonKill(parts []schedule.Fault) int {
	at := -1
	for i, p := range parts {
		if p.Kind == schedule.DaemonKill {
			at = i
		}
	}
	return at
}

// livesInTheDaemon: the kind's effect is held in the daemon's memory (the
// driver rules it armed, an actor's restart in its tree), so a daemon
// SIGKILLed right after may take it along before it shows: a relaunched
// daemon has no rules and a fresh tree.
func livesInTheDaemon(k schedule.Kind) bool {
	switch k {
	case schedule.DriverFail, schedule.DriverTimeout, schedule.DriverHang,
		schedule.PanicReplica, schedule.PanicService, schedule.PanicStack:
		return true
	}
	return false
}

// latched is a witness that, once it saw the effect, stays satisfied: the
// parts of a compound show their effects at different looks.
func latched(w func(observation) bool) func(observation) bool {
	seen := false
	return func(o observation) bool {
		seen = seen || w(o)
		return seen
	}
}

func allSkipped(done []string) bool {
	for _, d := range done {
		if !strings.Contains(d, " skipped (") {
			return false
		}
	}
	return true
}
