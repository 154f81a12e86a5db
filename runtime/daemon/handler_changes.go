package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/journal"
)

// Apply parses every file first: one bad file refuses the whole request
// and nothing changes (SVC-2). Then each stack is validated and recorded
// (SVC-5); with Wait, progress streams until the changed services converge
// or one fails.
func (h *handler) Apply(ctx context.Context, args control.ApplyArgs, progress func(control.ApplyProgress) error) (control.ApplyResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ApplyResult{}, err
	}
	var stacks []*stackfile.Stack
	for _, f := range args.Files {
		st, err := stackfile.Parse(filepath.Base(f.Name), []byte(f.Content))
		if err != nil {
			return control.ApplyResult{}, control.Errorf(control.CodeInvalid, "%v", err)
		}
		stacks = append(stacks, st)
	}
	res := control.ApplyResult{DryRun: args.DryRun}
	since := rt.journal.LastSeq()
	// A stack the config's files declare is refused before anything
	// changes (SVC-23).
	notes, sources := make([][]string, len(stacks)), make([]string, len(stacks))
	for i, st := range stacks {
		source, note, err := h.checkApplyListed(rt, st, args.DryRun)
		if err != nil {
			return res, err
		}
		sources[i] = source
		if note != "" {
			notes[i] = []string{note}
		}
	}
	for i, st := range stacks {
		applied, err := rt.deployer.Apply(ctx, st, sources[i], args.DryRun)
		if err != nil {
			return res, errCode(err)
		}
		plan := control.StackPlan{Stack: st.Name, Changes: applied.Changes, Notes: append(notes[i], applied.Notes...)}
		if cur, ok, _ := rt.journal.Stack(st.Name); ok && !args.DryRun {
			plan.Deployment = fmt.Sprint(cur.Current.ID)
		}
		res.Stacks = append(res.Stacks, plan)
	}
	if !args.Wait || args.DryRun {
		return res, nil
	}
	if err := progress(control.ApplyProgress{Planned: res.Stacks}); err != nil {
		return res, nil
	}
	return h.waitConverged(ctx, rt, res, since, progress)
}

// waitConverged follows the changed services until every one converges or
// one pauses, rolls back or fails (SVC-5).
func (h *handler) waitConverged(ctx context.Context, rt *runtime, res control.ApplyResult, since uint64, progress func(control.ApplyProgress) error) (control.ApplyResult, error) {
	type key struct{ stack, service string }
	watch := map[key]bool{}
	for _, p := range res.Stacks {
		for _, c := range p.Changes {
			if c.Action != stackfile.ActionUnchanged && c.Action != stackfile.ActionRemove {
				watch[key{p.Stack, c.Service}] = true
			}
		}
	}
	seen := map[key]string{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		done := true
		for k := range watch {
			svc, ok := rt.board.Service(k.stack, k.service)
			if !ok {
				done = false
				continue
			}
			if sig := fmt.Sprint(svc.State, svc.Message, svc.Rollout); sig != seen[k] {
				seen[k] = sig
				s := svc
				if err := progress(control.ApplyProgress{Service: &s}); err != nil {
					return res, nil
				}
			}
			switch {
			case svc.State == messages.ServicePaused || svc.State == messages.ServiceFailing || svc.State == messages.ServiceBackoff:
				res.Outcome = control.OutcomeFailed
				res.Failed = append(res.Failed, svc)
				return res, nil
			case svc.State != messages.ServiceConverged || svc.Deployment != deploymentOf(res, k.stack):
				done = false
			}
		}
		// A rollout that failed says so in the event log, also when it was
		// rolled back and its service converged on the previous revision.
		if failed := failedSince(rt, since, func(stack, service string) bool { return watch[key{stack, service}] }); len(failed) > 0 {
			res.Outcome = control.OutcomeFailed
			for _, k := range failed {
				if svc, ok := rt.board.Service(k[0], k[1]); ok {
					res.Failed = append(res.Failed, svc)
				}
			}
			return res, nil
		}
		if done {
			res.Outcome = control.OutcomeConverged
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, nil
		case <-tick.C:
		}
	}
}

func deploymentOf(res control.ApplyResult, stack string) string {
	for _, p := range res.Stacks {
		if p.Stack == stack {
			return p.Deployment
		}
	}
	return ""
}

func (h *handler) Remove(_ context.Context, args control.RemoveArgs) (control.ChangeResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ChangeResult{}, err
	}
	if err := h.refuseRemoveListed(rt, args.Stack); err != nil {
		return control.ChangeResult{Stack: args.Stack}, err
	}
	return control.ChangeResult{Stack: args.Stack}, errCode(rt.deployer.Remove(args.Stack))
}

func (h *handler) Scale(ctx context.Context, args control.ScaleArgs) (control.ScaleResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ScaleResult{}, err
	}
	sc, err := rt.deployer.Scale(args.Stack, args.Service, args.Replicas, who(ctx))
	res := control.ScaleResult{Stack: args.Stack, Service: args.Service, From: sc.From, To: sc.To,
		FileReplicas: sc.File, Changed: sc.Changed}
	if o := sc.Override; o != nil {
		shownOverride := shown(messages.OverrideReplicas, o.Value, o.File, *o)
		res.Override = &shownOverride
	}
	return res, errCode(err)
}

func (h *handler) Rollback(ctx context.Context, args control.StackRef) (control.ChangeResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ChangeResult{}, err
	}
	rb, err := rt.deployer.Rollback(args.Stack, who(ctx))
	if err != nil {
		return control.ChangeResult{Stack: args.Stack}, errCode(err)
	}
	res := control.ChangeResult{Stack: args.Stack, Deployment: strconv.FormatUint(rb.To, 10)}
	if o := rb.Override; o != nil {
		so := shown(messages.OverrideDeployment, o.Value, o.Replaced, *o)
		res.Override = &so
		res.Notes = append(res.Notes, fmt.Sprintf("a reload or restart keeps deployment %d until the stack file changes; "+
			"`engenho rollback %s` goes back to deployment %s, the stack file's", rb.To, args.Stack, o.Replaced))
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("deployment %d is the stack file's own: no override is left", rb.To))
	}
	return res, nil
}

func (h *handler) Redeploy(_ context.Context, args control.ServiceRef) (control.ChangeResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ChangeResult{}, err
	}
	return control.ChangeResult{Stack: args.Stack}, errCode(rt.deployer.Redeploy(args.Stack, args.Service))
}

func (h *handler) ServiceStop(ctx context.Context, args control.ServiceRef) (control.ServiceIntentResult, error) {
	return h.intent(args, true, who(ctx))
}

func (h *handler) ServiceStart(ctx context.Context, args control.ServiceRef) (control.ServiceIntentResult, error) {
	return h.intent(args, false, who(ctx))
}

func (h *handler) ServiceRetry(_ context.Context, args control.ServiceRef) (control.ServiceIntentResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ServiceIntentResult{}, err
	}
	return control.ServiceIntentResult{Stack: args.Stack, Service: args.Service, Changed: true}, errCode(rt.deployer.Retry(args.Stack, args.Service))
}

func (h *handler) intent(args control.ServiceRef, stopped bool, by journal.Who) (control.ServiceIntentResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ServiceIntentResult{}, err
	}
	was, _ := rt.journal.IsStopped(args.Stack, args.Service)
	res := control.ServiceIntentResult{Stack: args.Stack, Service: args.Service, Stopped: stopped, Changed: was != stopped}
	return res, errCode(rt.deployer.SetStopped(args.Stack, args.Service, stopped, by))
}

// who is who sent the request: the socket's peer (SO_PEERCRED), or this
// process for a request that did not come through the socket.
func who(ctx context.Context) journal.Who {
	if p, ok := control.PeerFrom(ctx); ok {
		return journal.Who{UID: p.UID, GID: p.GID, PID: p.PID, User: control.UserName(p.UID)}
	}
	uid := uint32(os.Getuid())
	return journal.Who{UID: uid, GID: uint32(os.Getgid()), PID: int32(os.Getpid()), User: control.UserName(uid)}
}

// Logs streams replica output (SVC-21): each replica's, or one slot's.
func (h *handler) Logs(ctx context.Context, args control.LogsArgs, send func(control.LogChunk) error) (control.LogsResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.LogsResult{}, err
	}
	svc, ok := rt.board.Service(args.Stack, args.Service)
	if !ok {
		return control.LogsResult{}, control.Errorf(control.CodeNotFound, "no service %s/%s", args.Stack, args.Service)
	}
	drv, ok := rt.drivers[svc.Driver]
	if !ok {
		return control.LogsResult{}, control.Errorf(control.CodeUnavailable, "driver %q is not running", svc.Driver)
	}
	var reps []messages.ReplicaStatus
	for _, r := range svc.Replicas {
		if args.Slot == 0 || r.Slot == args.Slot {
			reps = append(reps, r)
		}
	}
	if len(reps) == 0 {
		if svc.FailureOutput != "" {
			return control.LogsResult{}, send(control.LogChunk{Text: svc.FailureOutput + "\n"})
		}
		return control.LogsResult{}, control.Errorf(control.CodeNotFound, "no replica of %s/%s in slot %d", args.Stack, args.Service, args.Slot)
	}
	if args.Follow && len(reps) > 1 {
		return control.LogsResult{}, control.Errorf(control.CodeInvalid, "follow one replica at a time: add --slot")
	}
	lines := args.Lines
	if lines == 0 {
		lines = 100
	}
	for _, r := range reps {
		if err := streamLogs(ctx, drv, r, lines, args.Follow, send); err != nil {
			return control.LogsResult{}, err
		}
	}
	return control.LogsResult{}, nil
}

func streamLogs(ctx context.Context, drv drivers.Driver, r messages.ReplicaStatus, lines int, follow bool, send func(control.LogChunk) error) error {
	rc, err := drv.Logs(ctx, r.Instance, drivers.LogOptions{Tail: lines, Follow: follow})
	if err != nil {
		return control.Errorf(control.CodeUnavailable, "logs of %s: %v", r.Instance, err)
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if send(control.LogChunk{Slot: r.Slot, Instance: r.Instance, Text: line}) != nil {
				return nil
			}
		}
		if err == io.EOF || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return control.Errorf(control.CodeUnavailable, "logs of %s: %v", r.Instance, err)
		}
	}
}

// failedSince lists the watched services with a deploy.failed event after
// sequence number since.
func failedSince(rt *runtime, since uint64, watched func(stack, service string) bool) [][2]string {
	evs, err := rt.journal.EventsAfter(since, 10000)
	if err != nil {
		return nil
	}
	var out [][2]string
	for _, ev := range evs {
		if ev.Kind == messages.KindDeployFailed && watched(ev.Stack, ev.Service) {
			out = append(out, [2]string{ev.Stack, ev.Service})
		}
	}
	return out
}
