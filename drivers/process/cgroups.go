package process

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/cgroup"
)

// Each instance's runs happen in a cgroup of its own, ROOT/NAME, made at
// the first Start after a stop and kept across the runs that follow (a
// crash and its restart), so the restart path makes no directory; Stop,
// Kill and Delete empty it and remove it (DRV-12, DRV-15).

// openCgroups picks the driver's cgroup host: the one given, else the
// detected one. Without one, instances run without cgroups and limits are
// refused (DRV-17).
func (d *Driver) openCgroups() {
	if d.opts.NoCgroups {
		d.cgErr = errors.New("cgroups are turned off for this driver")
		return
	}
	if d.opts.Cgroups != nil {
		d.cg = d.opts.Cgroups
		return
	}
	h, err := cgroup.Detect(cgroup.Options{Root: d.opts.CgroupRoot})
	if err != nil {
		d.cgErr = err
		d.log.Warn().Err(err).Msg("instances run without cgroups: no limits, usage of the main process only")
		return
	}
	d.cg = h
	d.log.Info().Str("cgroups", h.Describe()).Msg("instances run in cgroups of their own")
}

// limitsOf is the spec's resources as cgroup limits.
func limitsOf(r drivers.Resources) cgroup.Limits {
	return cgroup.Limits{CPUs: r.CPUs, MemoryBytes: r.MemoryBytes, MemoryLowBytes: r.MemoryReservationBytes, Pids: r.Pids}
}

// checkLimits says why the spec's limits cannot be enforced on this node
// (Validate and Create, so a deploy is refused before anything changes).
func (d *Driver) checkLimits(r drivers.Resources) error {
	l := limitsOf(r)
	if l == (cgroup.Limits{}) {
		return nil
	}
	if r.CPUs < 0 || r.MemoryBytes < 0 || r.MemoryReservationBytes < 0 || r.Pids < 0 {
		return errors.New("resources must not be negative")
	}
	if n := runtime.NumCPU(); r.CPUs > float64(n) {
		return fmt.Errorf("cpus %g is more than the %d CPUs of this node", r.CPUs, n)
	}
	if d.cg == nil {
		return fmt.Errorf("%s cannot be enforced: %v; run the daemon as root on a host with cgroups, or remove the limits", l.Describe(), d.cgErr)
	}
	if err := d.cg.Check(l); err != nil {
		return fmt.Errorf("%s cannot be enforced on this node: %w", l.Describe(), err)
	}
	return nil
}

// prepareCgroup makes sure in has an empty cgroup for its next run;
// in.mu must be held. The restart path costs nothing here unless the last
// run left processes behind, or the instance has a cpus limit (one write,
// see cgroup.Group.RefreshCPU).
func (d *Driver) prepareCgroup(ctx context.Context, in *instance) error {
	if d.cg == nil {
		if l := limitsOf(in.rec.Spec.Resources); l != (cgroup.Limits{}) {
			return drivers.Errorf(DriverName, opStart, in.name, drivers.ErrInvalid, "%s cannot be enforced: %v", l.Describe(), d.cgErr)
		}
		return nil
	}
	if in.cgRetiring != nil {
		select {
		case <-in.cgRetiring:
		case <-ctx.Done():
			return drivers.Wrap(DriverName, opStart, in.name, drivers.ErrTransient, fmt.Errorf("the last run's cgroup is still being removed: %w", ctx.Err()))
		}
	}
	if in.cg == nil {
		g, err := d.cg.Create(in.name, limitsOf(in.rec.Spec.Resources))
		if err != nil {
			kind := drivers.ErrTransient
			if errors.Is(err, cgroup.ErrBusy) || errors.Is(err, cgroup.ErrUnavailable) {
				kind = drivers.ErrInvalid
			}
			return drivers.Wrap(DriverName, opStart, in.name, kind, err)
		}
		in.cg, in.rec.Cgroup, in.rec.OOMKills, in.leftovers = g, g.Rel(), 0, false
		return nil
	}
	if in.leftovers {
		if err := in.cg.Drain(ctx, d.sleep); err != nil {
			return drivers.Wrap(DriverName, opStart, in.name, drivers.ErrTransient, err)
		}
		in.leftovers = false
	}
	if err := in.cg.RefreshCPU(); err != nil {
		d.log.Warn().Err(err).Str("instance", in.name).Msg("cannot refresh the cpu quota")
	}
	return nil
}

// retireCgroup empties and removes in's cgroup once its run has ended
// (Stop, Kill): nothing of the instance is left running, also what left
// its process group (DRV-15). A Start that comes meanwhile waits for it.
func (d *Driver) retireCgroup(ctx context.Context, in *instance) error {
	in.mu.Lock()
	g := in.cg
	if g == nil || in.proc != nil {
		in.mu.Unlock()
		return nil // no cgroup, or a new run began in it meanwhile
	}
	in.cg, in.leftovers, in.rec.Cgroup = nil, false, ""
	done := make(chan struct{})
	in.cgRetiring = done
	snap, v := in.snapshot()
	in.mu.Unlock()
	defer close(done)
	if err := g.Drain(ctx, d.sleep); err != nil {
		d.keepCgroup(in, g)
		return err
	}
	if err := g.Remove(ctx, d.sleep); err != nil {
		d.keepCgroup(in, g)
		return err
	}
	g.Close()
	// Recorded only once it is gone: a daemon that dies before still
	// finds the cgroup, and what is in it, through the state file.
	return in.persist(snap, v)
}

// keepCgroup hands a cgroup that could not be emptied or removed back to
// in, so the next Stop, Delete or Start tries again instead of forgetting
// a half-removed group (one hierarchy's directory gone, another's left).
func (d *Driver) keepCgroup(in *instance, g *cgroup.Group) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cg == nil && in.proc == nil {
		in.cg, in.leftovers, in.rec.Cgroup = g, true, g.Rel()
	}
}

// sleep waits d on the driver's clock, or until ctx ends.
func (d *Driver) sleep(ctx context.Context, dur time.Duration) error {
	t := d.clk.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-d.done:
		return errClosed
	}
}

// oomReason says whether the run that just ended was OOM-killed: the
// cgroup's OOM counter grew during it (DRV-14). Read only when it can
// matter: the instance has a memory limit, or the run was SIGKILLed
// (a global OOM kill). in.mu must be held.
func (d *Driver) oomReason(in *instance, st exitStatus) string {
	limit := in.rec.Spec.Resources.MemoryBytes
	if in.cg == nil || limit <= 0 && st.signal != "killed" {
		return ""
	}
	n, err := in.cg.OOMKills()
	if err != nil || n <= in.rec.OOMKills {
		return ""
	}
	in.rec.OOMKills = n
	what := "no memory limit: the node ran out"
	if limit > 0 {
		what = "limit " + cgroup.FormatBytes(limit)
	}
	if st.signal == "killed" {
		return "oom-killed (" + what + ")"
	}
	code := fmt.Sprintf("exited with code %d", st.code)
	if st.signal != "" {
		code = "killed by signal " + st.signal
	}
	return code + " after the kernel oom-killed a process of it (" + what + ")"
}

// findCgroup gives a loaded instance back the cgroup its state file names,
// when it still exists (DRV-15): an adopted run's leftovers, and its
// Stop, reach every process in it.
func (d *Driver) findCgroup(in *instance) {
	if in.rec.Cgroup == "" {
		return
	}
	if d.cg == nil {
		d.log.Warn().Str("instance", in.name).Str("cgroup", in.rec.Cgroup).Msg("the state file names a cgroup but this driver has none; its processes are reached by process group only")
		return
	}
	if g, ok := d.cg.Open(in.rec.Cgroup, limitsOf(in.rec.Spec.Resources)); ok {
		in.cg = g
		return
	}
	in.rec.Cgroup = "" // gone (a reboot): the next Start makes a new one
}
