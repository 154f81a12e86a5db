package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/stackfile"
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
	for _, st := range stacks {
		changes, err := rt.deployer.Apply(ctx, st, "socket: "+st.Source, args.DryRun)
		if err != nil {
			return res, errCode(err)
		}
		plan := control.StackPlan{Stack: st.Name, Changes: changes}
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
			case svc.State == messages.ServicePaused || svc.State == messages.ServiceFailing:
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
	ch, err := rt.deployer.Remove(args.Stack)
	return changeResult(args.Stack, ch), errCode(err)
}

// changeResult answers remove, rollback and redeploy with what the
// deployer did.
func changeResult(stack string, ch Changed) control.ChangeResult {
	res := control.ChangeResult{Stack: stack, Changes: ch.Changes, AlreadyRemoving: ch.Already}
	if ch.Deployment != 0 {
		res.Deployment = fmt.Sprint(ch.Deployment)
	}
	return res
}

func (h *handler) Scale(_ context.Context, args control.ScaleArgs) (control.ScaleResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ScaleResult{}, err
	}
	res := control.ScaleResult{Stack: args.Stack, Service: args.Service, To: args.Replicas}
	if svc, ok := rt.board.Service(args.Stack, args.Service); ok {
		res.From = svc.Desired
	}
	return res, errCode(rt.deployer.Scale(args.Stack, args.Service, args.Replicas))
}

func (h *handler) Rollback(_ context.Context, args control.StackRef) (control.ChangeResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ChangeResult{}, err
	}
	ch, err := rt.deployer.Rollback(args.Stack)
	return changeResult(args.Stack, ch), errCode(err)
}

func (h *handler) Redeploy(_ context.Context, args control.ServiceRef) (control.ChangeResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ChangeResult{}, err
	}
	ch, err := rt.deployer.Redeploy(args.Stack, args.Service)
	return changeResult(args.Stack, ch), errCode(err)
}

func (h *handler) ServiceStop(_ context.Context, args control.ServiceRef) (control.ServiceIntentResult, error) {
	return h.intent(args, true)
}

func (h *handler) ServiceStart(_ context.Context, args control.ServiceRef) (control.ServiceIntentResult, error) {
	return h.intent(args, false)
}

func (h *handler) ServiceRetry(_ context.Context, args control.ServiceRef) (control.ServiceIntentResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ServiceIntentResult{}, err
	}
	return control.ServiceIntentResult{Stack: args.Stack, Service: args.Service, Changed: true}, errCode(rt.deployer.Retry(args.Stack, args.Service))
}

func (h *handler) intent(args control.ServiceRef, stopped bool) (control.ServiceIntentResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ServiceIntentResult{}, err
	}
	was, _ := rt.journal.IsStopped(args.Stack, args.Service)
	res := control.ServiceIntentResult{Stack: args.Stack, Service: args.Service, Stopped: stopped, Changed: was != stopped}
	return res, errCode(rt.deployer.SetStopped(args.Stack, args.Service, stopped))
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
