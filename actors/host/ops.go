package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/engenho/engenho/actors/sidecar"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/drivers/objstore/lease"
	"github.com/engenho/engenho/drivers/probe"
	"github.com/engenho/engenho/messages"
)

// opFunc runs in an operation's goroutine; it fills r and returns the
// outcome.
type opFunc func(ctx context.Context, r *result) (outcome string, err error)

// launch runs fn in a goroutine bounded by timeout (SUP-4) and reports a
// HostOpDone numbered seq.
func (a *Actor) launch(op Op, timeout time.Duration, fn opFunc) {
	a.seq++
	seq, r := a.seq, &result{}
	a.ops[seq] = r
	self, eng := a.h.PID(), a.h.Engine()
	ctx, cancel := clock.WithTimeout(a.h.Clock(), a.ctx, timeout)
	go func() {
		defer cancel()
		outcome, err := fn(ctx, r)
		eng.Send(self, messages.HostOpDone{Seq: seq, Op: string(op), Outcome: outcome, Err: errText(err)})
	}()
}

// startOp launches a main operation of the core.
func (a *Actor) startOp(op Op) {
	def := a.wakeDef
	if op == OpDefinition || op == OpCleanup || op == OpReleaseOwed || op == OpSetDue && a.s.Phase == messages.HostAsleep {
		def = a.def
	}
	host, dir := a.host(), a.dataDir(def)
	drv, hasDriver := a.driver(def)
	step := a.env.StepTimeout
	switch op {
	case OpCleanup:
		labels := drivers.Labels{drivers.LabelStack: def.Stack, drivers.LabelService: def.Service}
		held := a.heldByThisNode(host)
		a.launch(op, step+def.Definition.StopGracePeriod, func(ctx context.Context, _ *result) (string, error) {
			if !hasDriver {
				return Failed, fmt.Errorf("driver %q not available", def.Definition.Driver)
			}
			if err := sidecar.Cleanup(ctx, drv, labels, def.Definition.StopGracePeriod); err != nil {
				return Failed, err
			}
			if held != nil && held(ctx) {
				return Resume, nil
			}
			return OK, nil
		})
	case OpDefinition:
		committed, latest := a.env.Committed, a.def
		a.launch(op, step, func(_ context.Context, r *result) (string, error) {
			r.def = latest
			if committed != nil {
				d, ok := committed(latest.Stack, latest.Service)
				if !ok {
					return Failed, fmt.Errorf("no committed definition for %s/%s", latest.Stack, latest.Service)
				}
				r.def = d
			}
			if r.def.Stopped {
				return Stopped, nil
			}
			if !hasDriver {
				return Failed, fmt.Errorf("driver %q not available", r.def.Definition.Driver)
			}
			return OK, nil
		})
	case OpAcquire:
		a.opAcquire(host)
	case OpRestore:
		cps, l, clk := a.env.Checkpoints, a.lease, a.h.Clock()
		a.launch(op, step, func(ctx context.Context, r *result) (string, error) {
			r.scanAt = clk.Now()
			return restore(ctx, cps, l, host, dir, r)
		})
	case OpSeed:
		a.opSeed(def, drv, dir)
	case OpStart:
		a.opStart(def, drv, dir)
	case OpReadyCheck:
		a.opReadyCheck(def, drv)
	case OpNextDue:
		a.opNextDue(def)
	case OpStopInstance:
		name, grace, unwatch := a.inst, def.Definition.StopGracePeriod, a.unwatch
		a.unwatch = nil
		labels := drivers.Labels{drivers.LabelStack: def.Stack, drivers.LabelService: def.Service}
		a.launch(op, grace+step, func(ctx context.Context, _ *result) (string, error) {
			if unwatch != nil {
				unwatch()
			}
			// A sidecar an actor crash left behind goes first (ACT-8 order).
			if found, err := drv.List(ctx, labels); err == nil {
				for _, st := range found {
					if st.Labels[stackfile.LabelSidecar] != "" {
						sidecar.StopAndDelete(ctx, drv, st.Name, grace)
					}
				}
			}
			if err := sidecar.StopAndDelete(ctx, drv, name, grace); err != nil {
				return Unproven, err
			}
			return OK, nil
		})
	case OpCheckpoint:
		a.opCheckpoint(op, false, dir)
	case OpSetDue:
		j, at := a.env.Journal, a.s.Due
		if a.s.Retiring {
			at = time.Time{}
		}
		a.launch(op, step, func(context.Context, *result) (string, error) {
			if j == nil || host == "" {
				return OK, nil
			}
			if err := j.SetDue(host, at); err != nil {
				return Failed, err
			}
			return OK, nil
		})
	case OpRelease:
		a.opRelease(host)
	case OpReleaseOwed:
		owed, store, prefix, j, clk := a.owed, a.env.Store, a.env.Prefix, a.env.Journal, a.h.Clock()
		a.launch(op, step, func(ctx context.Context, _ *result) (string, error) {
			if owed == nil {
				return OK, nil
			}
			settled, err := ReleaseOwed(ctx, store, prefix, *owed, clk.Now())
			if !settled {
				return Failed, err
			}
			if j != nil {
				if _, err := j.SettleRelease(owed.Host, owed.Epoch); err != nil {
					return Failed, err
				}
			}
			return OK, nil
		})
	}
}

// manager returns the host's lease manager, made on first use.
func (a *Actor) manager() (*lease.Manager, error) {
	if a.mgr == nil {
		m, err := lease.NewManager(lease.Config{Store: a.env.Store, Prefix: a.env.Prefix, Node: a.env.Node,
			Holder: a.env.Holder, TTL: a.env.LeaseTTL, Clock: a.h.Clock()})
		if err != nil {
			return nil, err
		}
		a.mgr = m
	}
	return a.mgr, nil
}

// heldByThisNode returns a check, run off the actor, of whether host's
// lease is still held, unreleased and unexpired, under this node's holder
// id (stable across daemon restarts): an earlier incarnation of this actor,
// or the last daemon run, ended with the host awake or before its release.
// nil when there is nothing to check (not a hibernating host, no store, a
// random holder id). A release already owed for that lease means the host
// had slept: it does not count.
func (a *Actor) heldByThisNode(host string) func(context.Context) bool {
	if host == "" || a.env.Store == nil || a.env.Holder == "" {
		return nil
	}
	mgr, err := a.manager()
	if err != nil {
		return nil
	}
	owed, clk, log := a.owed, a.h.Clock(), a.h.Log()
	return func(ctx context.Context) bool {
		rec, ok, err := mgr.Inspect(ctx, host)
		if err != nil {
			// Not knowing, the lease lapses at its expiry as before.
			log.Warn().Err(err).Msg("reading the lease after a restart")
			return false
		}
		switch {
		case !ok, rec.Released, !mgr.Holds(rec), !clk.Now().Before(rec.Expiry):
			return false
		case owed != nil && owed.Epoch == epochString(rec.Epoch):
			return false
		}
		return true
	}
}

func (a *Actor) opAcquire(host string) {
	mgr, err := a.manager()
	if err != nil {
		a.launch(OpAcquire, time.Second, func(context.Context, *result) (string, error) { return Failed, err })
		return
	}
	owed, j, metrics := a.owed, a.env.Journal, a.env.Metrics
	a.launch(OpAcquire, a.env.StepTimeout, func(ctx context.Context, r *result) (string, error) {
		l, err := mgr.Acquire(ctx, host)
		outcome := OK
		var held *lease.HeldError
		switch {
		case errors.As(err, &held):
			outcome = Held
			r.retryAfter = time.Duration(held.RetryAfter()) * time.Second
		case err != nil:
			outcome = Failed
		}
		if metrics != nil {
			metrics.LeaseOp("acquire", outcome)
		}
		if err != nil {
			return outcome, err
		}
		r.lease = l
		if owed != nil && j != nil {
			// This write supersedes whatever was owed.
			j.SettleRelease(owed.Host, owed.Epoch)
		}
		return OK, nil
	})
}

// restore claims the manifest under the lease (fencing out earlier
// holders, ACT-6), then restores the data directory unless the local copy
// is the current checkpoint (ACT-4). No local and no remote state is a
// fresh first boot.
func restore(ctx context.Context, cps *checkpoint.Checkpointer, l *lease.Lease, host, dir string, r *result) (string, error) {
	if cps == nil || l == nil {
		return Failed, errors.New("no checkpoint store")
	}
	head, err := cps.Claim(ctx, host, checkpoint.WriterOf(l))
	switch {
	case errors.Is(err, checkpoint.ErrFenced):
		return Lost, err
	case errors.Is(err, checkpoint.ErrCorrupt):
		return Corrupt, err
	case err != nil:
		return Failed, err
	}
	r.head, r.hasHead = head, true
	outcome := OK
	switch {
	case head.Manifest.Current == nil:
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return Failed, err
			}
			outcome = FirstBoot
		}
	case !cps.Fresh(head, dir):
		// The verified tree is in place now; syncing it to disk (settle)
		// runs beside the instance's start, off the wake's path (PERF-5).
		_, settle, err := cps.RestoreDeferred(ctx, head, dir)
		if err != nil {
			if errors.Is(err, checkpoint.ErrCorrupt) {
				return Corrupt, err
			}
			return Failed, err
		}
		r.settle = settle
		// Only a tree just restored is known to equal the checkpoint. A
		// local copy reused as it is may hold writes of an incarnation that
		// crashed before its checkpoint; with no signature the next
		// checkpoint uploads it.
		if sig, err := signature(dir); err == nil {
			r.sig, r.hasSig = sig, true
		}
	}
	return outcome, nil
}

// opSeed runs the declared seed command to completion on the host's
// driver (ACT-4); a failure removes the fresh directory, so the next wake
// is a first boot again.
func (a *Actor) opSeed(def messages.HostDefinition, drv drivers.Driver, dir string) {
	inst := stackfile.Instance{Stack: def.Stack, Slot: 1, ID: stackfile.NewInstanceID(), Deployment: def.Deployment, Bin: a.env.Bin}
	spec := stackfile.SidecarSpec(def.Definition, stackfile.Sidecar{Name: "seed", Command: def.Definition.Hibernate.Seed}, inst)
	maps.Copy(spec.Env, a.workloadEnv(def))
	spec.Labels[LabelHost] = a.host()
	grace := def.Definition.StopGracePeriod
	a.launch(OpSeed, a.env.StepTimeout, func(ctx context.Context, _ *result) (string, error) {
		code, err := runToEnd(ctx, drv, spec, grace)
		if err == nil && code != 0 {
			err = fmt.Errorf("seed exited %d", code)
		}
		if err != nil {
			os.RemoveAll(dir)
			os.Remove(dir + ".checkpoint")
			return Failed, err
		}
		return OK, nil
	})
}

// runToEnd creates, starts and waits for an instance, then deletes it.
func runToEnd(ctx context.Context, drv drivers.Driver, spec drivers.Spec, grace time.Duration) (int, error) {
	if err := drv.Create(ctx, spec); err != nil {
		return 0, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+10*time.Second)
		defer cancel()
		sidecar.StopAndDelete(cctx, drv, spec.Name, grace)
	}()
	exited := make(chan drivers.Exit, 1)
	if err := drv.Start(ctx, spec.Name); err != nil {
		return 0, err
	}
	stop, err := drv.Watch(spec.Name, func(e drivers.Exit) { exited <- e })
	if err != nil {
		return 0, err
	}
	defer stop()
	select {
	case e := <-exited:
		return e.ExitCode, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("did not finish: %w", context.Cause(ctx))
	}
}

// opStart creates and starts the instance with ENGENHO_DATA_DIR, watches
// it and reads its address (ACT-4).
func (a *Actor) opStart(def messages.HostDefinition, drv drivers.Driver, dir string) {
	inst := stackfile.Instance{Stack: def.Stack, Slot: 1, ID: stackfile.NewInstanceID(), Deployment: def.Deployment, Bin: a.env.Bin}
	spec := stackfile.InstanceSpec(def.Definition, inst)
	spec.Labels[drivers.LabelRevision] = def.Revision
	spec.Labels[LabelHost] = a.host()
	maps.Copy(spec.Env, a.workloadEnv(def))
	a.inst, a.exitEarly = spec.Name, false
	a.startSettle()
	target, grace := port(def.Definition), def.Definition.StopGracePeriod
	labels := drivers.Labels{drivers.LabelStack: def.Stack, drivers.LabelService: def.Service}
	self, eng := a.h.PID(), a.h.Engine()
	a.launch(OpStart, a.env.StepTimeout, func(ctx context.Context, r *result) (string, error) {
		r.inst = spec.Name
		if err := sidecar.Cleanup(ctx, drv, labels, grace); err != nil {
			return Failed, fmt.Errorf("clearing leftovers: %w", err)
		}
		fail := func(err error) (string, error) {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+10*time.Second)
			defer cancel()
			sidecar.StopAndDelete(cctx, drv, spec.Name, grace)
			return Failed, err
		}
		if err := drv.Create(ctx, spec); err != nil {
			return Failed, err
		}
		if err := drv.Start(ctx, spec.Name); err != nil {
			return fail(err)
		}
		stop, err := drv.Watch(spec.Name, func(e drivers.Exit) {
			eng.Send(self, messages.HostInstanceExited{Instance: spec.Name, Exit: e})
		})
		if err == nil {
			r.unwatch = stop
		}
		st, err := drv.Inspect(ctx, spec.Name)
		if err != nil {
			if r.unwatch != nil {
				r.unwatch()
			}
			return fail(err)
		}
		r.addrs = st.Addresses
		if target != 0 && st.Addresses[target] == "" && st.State == drivers.StateRunning {
			if r.unwatch != nil {
				r.unwatch()
			}
			return fail(fmt.Errorf("no address for port %d", target))
		}
		return OK, nil
	})
}

// opReadyCheck checks readiness once: the healthcheck, or, without one, a
// TCP connect to the edge port.
func (a *Actor) opReadyCheck(def messages.HostDefinition, drv drivers.Driver) {
	if a.prober == nil {
		a.prober = probe.NewProber(drv, a.h.Clock())
	}
	cfg := def.Definition.ProbeConfig()
	if !cfg.Enabled() {
		cfg = probe.Config{Kind: probe.KindTCP, Port: port(def.Definition), Timeout: 2 * time.Second}.WithDefaults()
	}
	if cfg.Port == 0 {
		cfg.Port = port(def.Definition)
	}
	pr, target := a.prober, probe.Target{Instance: a.inst, Addresses: maps.Clone(a.addrs)}
	a.launch(OpReadyCheck, a.env.StepTimeout, func(ctx context.Context, _ *result) (string, error) {
		res := pr.Probe(ctx, cfg, target)
		if res.Outcome == probe.Healthy {
			return OK, nil
		}
		return NotReady, errors.New(res.Output)
	})
}

// opNextDue asks the instance its next due time (ACT-10), or reads the
// file a worker wrote. Anything unreadable is "none".
func (a *Actor) opNextDue(def messages.HostDefinition) {
	client, addr := a.client, a.addr
	file := a.workloadEnv(def)[EnvNextDueFile]
	a.launch(OpNextDue, NextDueTimeout, func(ctx context.Context, r *result) (string, error) {
		var raw []byte
		var err error
		if file != "" {
			raw, err = os.ReadFile(file)
			os.Remove(file)
		} else if addr != "" {
			raw, err = get(ctx, client, "http://"+addr+PathNextDue)
		}
		if err != nil || len(raw) == 0 {
			return OK, err
		}
		secs, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			return OK, fmt.Errorf("next-due: %q is not unix seconds", strings.TrimSpace(string(raw)))
		}
		if secs > 0 {
			r.due = time.Unix(secs, 0).UTC()
		}
		return OK, nil
	})
}

func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64))
}

// opCheckpoint saves the data directory (ACT-9): a periodic save skips a
// directory unchanged since the last save or restore, and the final one
// does too (the manifest already points at that state).
func (a *Actor) opCheckpoint(op Op, periodic bool, dir string) {
	a.startSettle()
	cps, l, head, last, settled := a.env.Checkpoints, a.lease, a.head, a.sig, a.settled
	timeout, clk := a.env.StepTimeout, a.h.Clock()
	run := func(ctx context.Context, r *result) (string, error) {
		if settled != nil {
			// A restore still syncing: save only once it is durable (and
			// its marker written, so Save's newer marker wins).
			select {
			case <-settled:
			case <-ctx.Done():
				return Failed, errors.New("restore still syncing")
			}
		}
		if cps == nil || l == nil || !l.Valid() {
			return Lost, errors.New("no valid lease")
		}
		r.scanAt = clk.Now()
		sig, err := signature(dir)
		if err != nil {
			return Failed, err
		}
		if sig == last {
			return Unchanged, nil
		}
		next, st, err := cps.Save(ctx, head, dir)
		switch {
		case errors.Is(err, checkpoint.ErrFenced):
			return Lost, err
		case err != nil:
			return Failed, err
		}
		r.head, r.hasHead, r.sig, r.hasSig, r.stats = next, true, sig, true, st
		return OK, nil
	}
	a.launch(op, timeout, run)
}

func (a *Actor) opRelease(host string) {
	l, metrics := a.lease, a.env.Metrics
	a.launch(OpRelease, a.env.StepTimeout, func(ctx context.Context, _ *result) (string, error) {
		if l == nil {
			return OK, nil
		}
		err := l.Release(ctx)
		outcome := OK
		switch {
		case errors.Is(err, lease.ErrLost):
			outcome = Lost
		case err != nil:
			outcome = Failed
		}
		if metrics != nil {
			metrics.LeaseOp("release", outcome)
		}
		return outcome, err
	})
}

// startSide launches a side operation.
func (a *Actor) startSide(op Op) {
	switch op {
	case SideRenew:
		l, metrics := a.lease, a.env.Metrics
		a.launch(op, a.cfg.RenewEvery, func(ctx context.Context, _ *result) (string, error) {
			if l == nil {
				return Failed, errors.New("no lease")
			}
			err := l.Renew(ctx)
			outcome := OK
			if err != nil && !errors.Is(err, lease.ErrReleased) {
				outcome = Failed
			}
			if metrics != nil {
				metrics.LeaseOp("renew", outcome)
			}
			if outcome == OK {
				return OK, nil
			}
			return Failed, err
		})
	case SideCheckpoint:
		a.opCheckpoint(op, true, a.dataDir(a.wakeDef))
	case SideTick:
		gate, client, clk, addr := a.gate, a.client, a.h.Clock(), a.addr
		a.launch(op, a.env.TickTimeout, func(ctx context.Context, _ *result) (string, error) {
			if _, ok := gate.Enter(clk.Now()); !ok {
				return OK, nil
			}
			defer gate.Leave(clk.Now(), false) // a tick is never activity (ACT-7)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+PathTick, nil)
			if err != nil {
				return Failed, err
			}
			resp, err := client.Do(req)
			if err != nil {
				return Failed, err
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			return OK, nil
		})
	}
}

// opDone takes an operation's result into the actor, then steps the core.
func (a *Actor) opDone(m messages.HostOpDone) {
	r, ok := a.ops[m.Seq]
	if !ok {
		return
	}
	delete(a.ops, m.Seq)
	op := Op(m.Op)
	switch op {
	case OpDefinition:
		if m.Outcome == OK || m.Outcome == Stopped {
			a.wakeDef = r.def
		}
	case OpAcquire:
		if m.Outcome == OK {
			a.lease, a.owed = r.lease, nil
		}
	case OpRestore, OpCheckpoint, SideCheckpoint:
		if op == OpRestore {
			a.settle, a.settled = r.settle, nil
		}
		if r.hasHead {
			a.head = r.head
		}
		if r.hasSig {
			a.sig = r.sig
		}
		a.noteReplicated(op, m.Outcome, r)
		if m.Outcome == OK && r.stats.MarkerErr != nil {
			a.h.Log().Warn().Err(r.stats.MarkerErr).Msg("checkpoint marker not written; the next wake here restores")
		}
	case OpStart:
		if m.Outcome == OK {
			a.addrs, a.unwatch = r.addrs, r.unwatch
			a.addr = r.addrs[port(a.wakeDef.Definition)]
		} else {
			a.inst = ""
		}
	case OpNextDue:
		if m.Err != "" {
			a.h.Log().Debug().Str("err", m.Err).Msg("next due time unknown; taken as none")
		}
		a.step(OpDone{Op: op, Outcome: m.Outcome, Err: m.Err, Due: r.due})
		return
	case OpStopInstance:
		if m.Outcome == OK {
			a.inst, a.addr, a.addrs = "", "", nil
		}
	case OpRelease:
		a.afterRelease(m)
	}
	if m.Outcome == Lost && a.lease != nil {
		// Fenced: another node claimed the host. The lease is gone; the
		// manager must know, or it refuses this host's next wake as busy.
		a.lease.Abandon()
		a.lease = nil
	}
	if isSide(op) {
		if op == SideRenew && m.Outcome != OK && a.lease != nil && a.lease.Lost() {
			a.lease = nil
		}
		if op == SideRenew && m.Outcome == OK {
			a.fenceGate() // the renewed lease moves the fence on
		}
		a.step(SideDone{Op: op, Outcome: m.Outcome, Err: m.Err})
		return
	}
	a.step(OpDone{Op: op, Outcome: m.Outcome, Err: m.Err, RetryAfter: r.retryAfter})
	if op == OpStart && m.Outcome == OK && a.exitEarly {
		a.exitEarly = false
		a.step(InstanceExited{Code: -1})
	}
}

// startSettle syncs a deferred restore in its own goroutine; checkpoints
// wait for it.
func (a *Actor) startSettle() {
	settle := a.settle
	if settle == nil {
		return
	}
	a.settle = nil
	done := make(chan struct{})
	a.settled = done
	log := a.h.Log()
	go func() {
		defer close(done)
		if err := settle(); err != nil {
			log.Warn().Err(err).Msg("syncing the restored data directory; the next wake here restores again")
		}
	}()
}

func isSide(op Op) bool { return op == SideRenew || op == SideCheckpoint || op == SideTick }

// afterRelease records a failed release as owed (ACT-8): in the journal,
// keyed by the lease epoch and conditional on the ETag last written.
func (a *Actor) afterRelease(m messages.HostOpDone) {
	l := a.lease
	a.lease = nil
	if m.Outcome != Failed || l == nil {
		return
	}
	rec := l.Record()
	owed := messages.OwedRelease{Host: a.host(), Epoch: epochString(rec.Epoch), ETag: l.ETag(), Expires: rec.Expiry,
		Attempts: 1, LastError: m.Err}
	a.owed = &owed
	a.mgr = nil // a fresh manager resumes this lease if it wakes first
	if a.env.Journal != nil {
		if err := a.env.Journal.OweRelease(owed); err != nil {
			a.h.Log().Error().Err(err).Msg("recording an owed release")
		}
	}
}
