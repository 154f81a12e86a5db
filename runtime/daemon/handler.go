package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// handler answers the control socket (DMN-11, DMN-12). Reads come from
// published snapshots and never wait on the loop or an actor (DMN-13);
// changes are recorded in the journal before they are answered.
type handler struct {
	d       *Daemon
	version string
}

var _ control.Handler = (*handler)(nil)

func (h *handler) running() (*runtime, error) {
	rt := h.d.rt.Load()
	if rt == nil {
		return nil, control.Errorf(control.CodeUnavailable, "%s", notRunning(h.d.Snapshot().State))
	}
	return rt, nil
}

// notRunning says what the runtime is doing instead of running (with its
// boot phase or drain step) and what brings it up.
func notRunning(st lifecycle.State) string {
	switch {
	case st.Name == lifecycle.Failed && st.LastError != nil && st.LastError.Class == lifecycle.CauseCorrupt:
		return fmt.Sprintf("the runtime is %s: %v", st, st.LastError)
	case st.Name == lifecycle.Failed && st.LastError != nil:
		return fmt.Sprintf("the runtime is %s: %v; `engenho retry` boots it again", st, st.LastError)
	case st.Name == lifecycle.Stopped, st.Name == lifecycle.Failed:
		return fmt.Sprintf("the runtime is %s; `engenho start` boots it", st)
	case st.Name == lifecycle.Booting:
		return fmt.Sprintf("the runtime is %s; it answers once it runs", st)
	}
	return fmt.Sprintf("the runtime is %s", st)
}

func (h *handler) Status(_ context.Context, args control.StatusArgs) (control.StatusResult, error) {
	snap := h.d.Snapshot()
	res := control.StatusResult{Daemon: control.DaemonStatus{
		Lifecycle: snap.State, Node: control.NodeIdentity{Name: snap.Node.Name, ID: snap.Node.ID},
		PID: snap.Pid, Version: h.version, StartedAt: snap.StartedAt, PreviousRun: string(snap.PreviousRun.Outcome), DataDir: snap.DataDir,
	}}
	rt := h.d.rt.Load()
	if rt == nil {
		return res, nil
	}
	for _, st := range rt.board.Stacks() {
		if args.Stack == "" || st.Stack == args.Stack {
			res.Stacks = append(res.Stacks, st)
		}
	}
	for _, svc := range rt.board.Services(args.Stack) {
		if args.Service != "" && svc.Service != args.Service {
			continue
		}
		svc = withPortStats(rt, svc)
		svc = withUsage(rt, svc)
		svc.Overrides = rt.deployer.Overrides(svc.Stack, svc.Service)
		svc.StaleSecrets = rt.secrets.staleSecrets(svc)
		res.Services = append(res.Services, svc)
	}
	now := h.d.clk.Now()
	for _, hs := range rt.routes.Hosts() {
		if (args.Stack == "" || hs.Stack == args.Stack) && (args.Service == "" || hs.Service == args.Service) {
			hs.Fenced = hs.FencedAt(now)
			res.Hosts = append(res.Hosts, hs)
		}
	}
	if args.Stack != "" && len(res.Stacks) == 0 && len(res.Services) == 0 {
		return res, control.Errorf(control.CodeNotFound, "no stack %q", args.Stack)
	}
	if args.Service != "" && len(res.Services) == 0 && len(res.Hosts) == 0 {
		return res, control.Errorf(control.CodeNotFound, "stack %s has no service %q (engenho status %s lists its services)", args.Stack, args.Service, args.Stack)
	}
	return res, nil
}

// withUsage adds each running replica's last usage sample (DRV-16).
func withUsage(rt *runtime, svc messages.ServiceStatus) messages.ServiceStatus {
	if rt.usage == nil {
		return svc
	}
	reps := make([]messages.ReplicaStatus, len(svc.Replicas))
	for i, r := range svc.Replicas {
		if u, ok := rt.usage.Get(r.Instance); ok && r.Instance != "" {
			r.Usage = &u
		}
		reps[i] = r
	}
	svc.Replicas = reps
	return svc
}

// withPortStats fills a service's ports with the balancer's live counters
// (SVC-22).
func withPortStats(rt *runtime, svc messages.ServiceStatus) messages.ServiceStatus {
	ports := make([]messages.PortStatus, len(svc.Ports))
	for i, p := range svc.Ports {
		name := fmt.Sprintf("%s/%s/%s", svc.Stack, svc.Service, portOf(p.Listen))
		if st, ok := rt.balancer.Stats(name); ok {
			p.Accepted, p.Active, p.Rate = st.Accepted, int64(st.Active), st.Rate
			p.Backends = nil
			for _, b := range st.Backends {
				if b.InRotation {
					p.Backends = append(p.Backends, b.Addr)
				}
			}
		}
		ports[i] = p
	}
	svc.Ports = ports
	return svc
}

func portOf(listen string) string {
	for i := len(listen) - 1; i >= 0; i-- {
		if listen[i] == ':' {
			return listen[i+1:]
		}
	}
	return listen
}

func (h *handler) Tree(context.Context) (control.TreeResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.TreeResult{}, err
	}
	return control.TreeResult{Nodes: rt.sys.Tree.Snapshot()}, nil
}

func (h *handler) Why(_ context.Context, args control.WhyArgs) (control.WhyResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.WhyResult{}, err
	}
	res := control.WhyResult{Stack: args.Stack, Service: args.Service}
	res.Host = hostOfService(rt.routes.Hosts(), args.Stack, args.Service)
	res.Waiting = waitingActors(rt.sys.Tree.Snapshot(), args.Stack, args.Service, res.Host)
	svc, ok := rt.board.Service(args.Stack, args.Service)
	if !ok {
		return whyWithoutBoard(res)
	}
	res.State, res.Message = svc.State, svc.Message
	for _, r := range svc.Replicas {
		if args.Slot != 0 && r.Slot != args.Slot {
			continue
		}
		res.Slots = append(res.Slots, control.WhySlot{Slot: r.Slot, Instance: r.Instance, Phase: r.Phase, Health: r.Health,
			Restarts: r.Restarts, LastError: r.LastError, HasLedger: r.HasLedger, Ledger: r.Ledger})
	}
	if args.Slot != 0 && len(res.Slots) == 0 {
		return res, control.Errorf(control.CodeNotFound, "no replica in slot %d of %s/%s", args.Slot, args.Stack, args.Service)
	}
	return res, nil
}

// whyWithoutBoard answers for a service with no status on the board: a
// hibernating host, or a service whose actor waits out its backoff
// (SUP-21). Neither is not_found.
func whyWithoutBoard(res control.WhyResult) (control.WhyResult, error) {
	switch {
	case res.Host != nil:
		res.State = messages.ServiceState(res.Host.State)
		res.Message = res.Host.LastError
	case len(res.Waiting) > 0:
		res.State = messages.ServiceState(supervise.StateRestarting)
		res.Message = res.Waiting[0].Detail
	default:
		return res, control.Errorf(control.CodeNotFound, "no service %s/%s", res.Stack, res.Service)
	}
	return res, nil
}

// hostOfService is the hibernating host of stack/service, if it has one.
func hostOfService(hosts []messages.HostStatus, stack, service string) *messages.HostStatus {
	for _, h := range hosts {
		if h.Stack == stack && h.Service == service {
			return &h
		}
	}
	return nil
}

// waitingActors are the actors of stack/service (its service actor and
// replicas, or its host and sidecars) that wait out their backoff.
func waitingActors(nodes []supervise.Node, stack, service string, host *messages.HostStatus) []supervise.Node {
	var out []supervise.Node
	for _, n := range nodes {
		if n.State != supervise.StateRestarting {
			continue
		}
		st, sv, h := supervise.PathSubject(n.Path)
		if (st == stack && sv == service) || (host != nil && h == host.Host) {
			out = append(out, n)
		}
	}
	return out
}

func (h *handler) Events(ctx context.Context, args control.EventsArgs, send func(messages.Event) error) (control.EventsResult, error) {
	j, err := h.journal()
	if err != nil {
		return h.memEvents(ctx, args, send)
	}
	since := args.Since
	if args.Tail > 0 {
		if last := j.LastSeq(); last > uint64(args.Tail) {
			since = max(since, last-uint64(args.Tail))
		}
	}
	if !args.Follow {
		return h.eventsUntilNow(j, since, send)
	}
	sub := j.Subscribe(since)
	defer sub.Close()
	last := since
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return control.EventsResult{Last: last}, sub.Err()
			}
			if err := send(ev); err != nil {
				return control.EventsResult{Last: last}, nil
			}
			last = ev.Seq
		case <-ctx.Done():
			return control.EventsResult{Last: last}, nil
		}
	}
}

// memEvents answers events while the journal is closed: the daemon's own
// events kept in memory (why the boot failed), so a daemon held on a
// damaged journal still tells its story (REL-5). A follow ends when the
// runtime comes up: the journal has the events from then on.
func (h *handler) memEvents(ctx context.Context, args control.EventsArgs, send func(messages.Event) error) (control.EventsResult, error) {
	since := args.Since
	if last := h.d.mem.last(); args.Tail > 0 && last > uint64(args.Tail) {
		since = max(since, last-uint64(args.Tail))
	}
	res := control.EventsResult{Last: since, Memory: true}
	for {
		evs, changed := h.d.mem.after(res.Last)
		for _, ev := range evs {
			if err := send(ev); err != nil {
				return res, nil
			}
			res.Last = ev.Seq
		}
		if !args.Follow || h.d.rt.Load() != nil {
			return res, nil
		}
		t := h.d.clk.NewTimer(time.Second) // the runtime may have come up
		select {
		case <-changed:
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return res, nil
		}
		t.Stop()
	}
}

func (h *handler) eventsUntilNow(j *journal.Journal, since uint64, send func(messages.Event) error) (control.EventsResult, error) {
	for {
		evs, err := j.EventsAfter(since, 1000)
		if err != nil {
			return control.EventsResult{Last: since}, err
		}
		for _, ev := range evs {
			if err := send(ev); err != nil {
				return control.EventsResult{Last: since}, nil
			}
			since = ev.Seq
		}
		if len(evs) < 1000 {
			return control.EventsResult{Last: since}, nil
		}
	}
}

func (h *handler) journal() (*journal.Journal, error) {
	rt, err := h.running()
	if err != nil {
		return nil, err
	}
	return rt.journal, nil
}

func (h *handler) lifecycle(ctx context.Context, ev lifecycle.Event) (control.LifecycleResult, error) {
	r, err := h.d.command(ctx, ev)
	return control.LifecycleResult{State: r.state}, err
}

func (h *handler) Start(ctx context.Context) (control.LifecycleResult, error) {
	return h.lifecycle(ctx, lifecycle.StartRequested{})
}

func (h *handler) Stop(ctx context.Context, args control.StopArgs) (control.LifecycleResult, error) {
	return h.lifecycle(ctx, lifecycle.StopRequested{Hold: args.Hold})
}

func (h *handler) Restart(ctx context.Context) (control.LifecycleResult, error) {
	return h.lifecycle(ctx, lifecycle.RestartRequested{})
}

func (h *handler) Retry(ctx context.Context) (control.LifecycleResult, error) {
	return h.lifecycle(ctx, lifecycle.RetryRequested{})
}

func (h *handler) Exit(ctx context.Context) (control.LifecycleResult, error) {
	return h.lifecycle(ctx, lifecycle.ExitRequested{Source: "operator"})
}

// Reconfigure reloads the config (DMN-16). While running it waits for the
// reload and answers what it applied, or `invalid` with every error when
// the config or a stack file it lists was refused (nothing changed then).
// In other states the lifecycle decides (a failed boot retries, a boot in
// progress marks its config stale) and the answer is the state.
func (h *handler) Reconfigure(ctx context.Context) (control.ReconfigureResult, error) {
	r, err := h.d.command(ctx, lifecycle.ReconfigureRequested{})
	res := control.ReconfigureResult{State: r.state}
	if err != nil || r.reload == nil {
		return res, err
	}
	select {
	case out := <-r.reload:
		if len(out.Rejected) > 0 {
			return res, control.Errorf(control.CodeInvalid, "config rejected, the daemon keeps running on the config it has:\n  %s",
				strings.Join(out.Rejected, "\n  "))
		}
		res.Reloaded, res.Applied, res.NeedsRestart = true, out.Applied, out.NeedsRestart
		return res, nil
	case <-ctx.Done():
		return res, ctx.Err()
	}
}

func (h *handler) RestartChild(_ context.Context, args control.RestartChildArgs) (control.RestartChildResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.RestartChildResult{}, err
	}
	res, err := rt.engine.Request(rt.root, messages.RestartChild{Path: args.Path}, 10*time.Second).Result()
	if err != nil {
		return control.RestartChildResult{}, control.Errorf(control.CodeTimeout, "restart-child %s: %v", args.Path, err)
	}
	if r, ok := res.(messages.RestartChildResult); ok && r.Err != "" {
		return control.RestartChildResult{}, control.Errorf(control.CodeNotFound, "%s", r.Err)
	}
	return control.RestartChildResult{Path: args.Path}, nil
}

func (h *handler) Epoch(_ context.Context, args control.EpochArgs) (control.EpochResult, error) {
	snap := h.d.Snapshot()
	res := control.EpochResult{State: snap.State, Epoch: snap.State.Epoch, Attic: h.d.dir.Attic()}
	switch snap.State.Name {
	case lifecycle.Stopped, lifecycle.Failed:
		res.Allowed = true
	default:
		res.Reason = fmt.Sprintf("reinit is allowed only while stopped or failed; the daemon is %s (run `engenho stop` first)", snap.State.Name)
	}
	if args.What == control.ReinitJournal {
		res.Moves = []string{h.d.dir.Journal()}
	} else {
		res.Moves = []string{"the node identity (name, id) in the journal"}
	}
	return res, nil
}

func (h *handler) Reinit(ctx context.Context, args control.ReinitArgs) (control.ReinitResult, error) {
	r, err := h.d.command(ctx, lifecycle.ReinitRequested{What: args.What, Epoch: args.Epoch})
	if err != nil {
		return control.ReinitResult{}, err
	}
	res := control.ReinitResult{What: args.What, Moved: []string{r.detail}}
	if ri := r.reinit; ri != nil {
		res.Salvaged, res.Lost, res.Notes = ri.Salvaged, ri.Lost, ri.Summary()
	}
	if r.state.Name == lifecycle.Failed {
		res.Notes = append(res.Notes, "the daemon boots again now")
	}
	return res, nil
}

func (h *handler) Chaos(ctx context.Context, args control.ChaosArgs) (control.ChaosResult, error) {
	if h.d.opts.Hooks == nil {
		return control.ChaosResult{}, control.Errorf(control.CodeRefused, "%s", errNoChaos)
	}
	if !h.d.settingsNow().ChaosEnabled {
		return control.ChaosResult{}, control.Errorf(control.CodeRefused, "chaos is not enabled on this daemon (chaos.enabled: true)")
	}
	rt, err := h.running()
	if err != nil {
		return control.ChaosResult{}, err
	}
	return h.d.chaos(ctx, rt, args)
}

// errCode maps the deployer's errors onto wire codes.
func errCode(err error) error {
	var ce *control.Error
	switch {
	case err == nil || errors.As(err, &ce):
		return err
	case errors.Is(err, ErrUnknownStack), errors.Is(err, ErrUnknownService), errors.Is(err, journal.ErrNotFound):
		return control.Errorf(control.CodeNotFound, "%v", err)
	case errors.Is(err, ErrRemoving), errors.Is(err, journal.ErrNoPrevious):
		return control.Errorf(control.CodeConflict, "%v", err)
	case errors.Is(err, journal.ErrNoSpace), errors.Is(err, journal.ErrWriteFailed):
		return control.Errorf(control.CodeUnavailable, "%v", err)
	}
	return control.Errorf(control.CodeInvalid, "%v", err)
}
