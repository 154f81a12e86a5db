package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/journal"
)

// applyBound bounds the recording of an apply whose files were vetted:
// the driver validation it repeats, against a driver that hangs.
const applyBound = time.Minute

// Apply parses and validates every file first, and answers with every
// problem of every file at once: one bad file refuses the whole request
// and nothing changes (SVC-1, SVC-2). Then each stack is recorded (SVC-5);
// with Wait, progress streams until the changed services converge or one
// fails.
func (h *handler) Apply(ctx context.Context, args control.ApplyArgs, progress func(control.ApplyProgress) error) (control.ApplyResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ApplyResult{}, err
	}
	by := who(ctx)
	stacks, names, err := vetFiles(ctx, rt, args)
	if err != nil {
		if !args.DryRun {
			for _, name := range uniqueNames(names) {
				rt.deployer.refused(messages.AuditApply, name, "", by, err)
			}
		}
		return control.ApplyResult{}, err
	}
	res := control.ApplyResult{DryRun: args.DryRun}
	since := rt.journal.LastSeq()
	// A stack the config's files declare is refused before anything
	// changes (SVC-23).
	notes, sources := make([][]string, len(stacks)), make([]string, len(stacks))
	for i, st := range stacks {
		source, note, err := h.checkApplyListed(rt, st, args.DryRun)
		if err != nil {
			if !args.DryRun {
				rt.deployer.refused(messages.AuditApply, st.Name, "", by, err)
			}
			return res, err
		}
		sources[i] = source
		if note != "" {
			notes[i] = []string{note}
		}
	}
	// Every file is vetted: from here the request completes whether or not
	// the client stays, so a client gone between two stacks does not leave
	// the first applied and the second refused (control.Handler). A driver
	// that hangs still cannot hold the deployer (and the daemon's exit)
	// for longer than applyBound.
	change, cancel := context.WithTimeout(context.WithoutCancel(ctx), applyBound)
	defer cancel()
	for i, st := range stacks {
		before, _, _ := rt.journal.Stack(st.Name)
		applied, err := rt.deployer.Apply(change, st, sources[i], args.DryRun, &by)
		if err != nil {
			return res, errCode(err)
		}
		plan := control.StackPlan{Stack: st.Name, Changes: applied.Changes, Notes: append(notes[i], applied.Notes...), Warnings: warningLines(st)}
		// Deployment is the one the changes roll out on; an apply that
		// changes nothing and records nothing has none to wait for.
		if cur, ok, _ := rt.journal.Stack(st.Name); ok && !args.DryRun && (!unchanged(applied.Changes) || cur.Current.ID != before.Current.ID) {
			plan.Deployment = fmt.Sprint(cur.Current.ID)
		}
		res.Stacks = append(res.Stacks, plan)
	}
	if !args.Wait || args.DryRun {
		return res, nil
	}
	if nothingRecorded(res.Stacks) {
		res.Outcome = control.OutcomeConverged // nothing to roll out
		return res, nil
	}
	if err := progress(control.ApplyProgress{Planned: res.Stacks}); err != nil {
		return res, nil
	}
	return h.waitRollout(ctx, rt, res, since, monitorsOf(stacks), progress)
}

// vetFiles parses every file and validates every stack against the node
// and against the others, collecting every problem before anything is
// recorded. A file that does not parse still has its well-formed services
// checked against the node (stackfile.ValidateRest).
//
// names are the stacks the files name (a file that does not parse: its
// file name, when that makes a stack name), for the audit of a refusal.
func vetFiles(ctx context.Context, rt *runtime, args control.ApplyArgs) (_ []*stackfile.Stack, names []string, _ error) {
	var (
		stacks []*stackfile.Stack
		errs   []error
	)
	for _, f := range args.Files {
		opts := stackfile.Options{Env: args.Env, Dir: f.Dir, Profiles: args.Profiles}
		st, err := stackfile.ParseWith(f.Name, []byte(f.Content), opts)
		if err != nil {
			errs = append(errs, stackfile.ValidateRest(ctx, err, rt.deployer.node))
			var pe *stackfile.ParseError
			name := ""
			if errors.As(err, &pe) && stackfile.ValidName(pe.StackName()) {
				name = pe.StackName()
			}
			names = append(names, name) // "": recorded with no stack
			continue
		}
		stacks = append(stacks, st)
		names = append(names, st.Name)
	}
	for _, st := range stacks {
		if _, err := rt.deployer.Apply(ctx, st, "", true, nil); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ve := range together(stacks, errs) {
		errs = append(errs, ve)
	}
	switch len(errs) {
	case 0:
		return stacks, names, nil
	case 1:
		return nil, names, errCode(errs[0])
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return nil, names, control.Errorf(control.CodeInvalid, "refused, nothing changed:\n%s", strings.Join(msgs, "\n"))
}

func warningLines(st *stackfile.Stack) []string {
	var out []string
	for _, w := range st.Warnings {
		out = append(out, w.String())
	}
	return out
}

// monitorsOf gives each applied service's update_config.monitor.
func monitorsOf(stacks []*stackfile.Stack) func(svcKey) time.Duration {
	return func(k svcKey) time.Duration {
		for _, st := range stacks {
			if svc, ok := st.Services[k.service]; ok && st.Name == k.stack {
				return svc.Deploy.UpdateConfig.Monitor
			}
		}
		return stackfile.DefaultMonitor
	}
}

func nothingRecorded(plans []control.StackPlan) bool {
	for _, p := range plans {
		if p.Deployment != "" {
			return false
		}
	}
	return true
}

// waitRollout follows the changed services through the journal's events
// and the status board's change signal (no polling) until the one verdict
// is known: failed as soon as one service failed, converged once all did
// (SVC-5). Each event of a watched service and each snapshot that moved is
// streamed as progress.
func (h *handler) waitRollout(ctx context.Context, rt *runtime, res control.ApplyResult, since uint64, monitors func(svcKey) time.Duration,
	progress func(control.ApplyProgress) error) (control.ApplyResult, error) {
	w := newRolloutWatch(res.Stacks, monitors)
	f := follower{w: w, sub: rt.journal.Subscribe(since), progress: progress, read: since}
	defer f.sub.Close()
	clk := h.d.clk
	for {
		changed := rt.board.Changed() // taken before reading, so no change is missed
		now := clk.Now()
		for _, k := range w.keys() {
			svc, ok := rt.board.Service(k.stack, k.service)
			if w.status(k, svc, ok, now) {
				p := control.ApplyProgress{Service: &svc}
				if until, held := w.holding(k); held {
					p.Note = fmt.Sprintf("holding %s before the verdict (update_config.monitor)", until.Sub(now).Round(time.Millisecond))
				}
				if progress(p) != nil {
					return res, nil
				}
			}
		}
		if outcome, done := w.outcome(); done {
			f.catchUp(ctx, rt.journal)
			res.Outcome = outcome
			res.Verdicts, res.Failed = w.verdicts()
			return res, nil
		}
		look, stop := lookAgain(clk, w, now)
		end, err := f.next(ctx, rt, look, changed)
		stop()
		if end {
			return res, err
		}
	}
}

// next waits for the next thing to look at: an event (taken), a board
// change, the end of a monitor window. end is set when the wait must stop:
// the client went away, or the runtime or its journal is going (err).
func (f *follower) next(ctx context.Context, rt *runtime, look <-chan time.Time, changed <-chan struct{}) (end bool, err error) {
	select {
	case <-look:
	case <-changed:
	case ev, ok := <-f.sub.Events():
		if !ok {
			return true, control.Errorf(control.CodeUnavailable, "the journal closed while following the rollout: %v", f.sub.Err())
		}
		return !f.take(ev), nil
	case <-rt.draining:
		return true, control.Errorf(control.CodeUnavailable, "the runtime is stopping; the rollout goes on when it runs again (engenho status)")
	case <-ctx.Done():
		return true, nil
	}
	return false, nil
}

// lookAgain is a timer for the end of the first running monitor window
// (nil: none runs), and its stop.
func lookAgain(clk clock.Clock, w *rolloutWatch, now time.Time) (<-chan time.Time, func()) {
	at, ok := w.nextLook()
	if !ok {
		return nil, func() {}
	}
	t := clk.NewTimer(at.Sub(now))
	return t.C(), func() { t.Stop() }
}

// follower feeds a rollout watch the journal's events and streams those of
// the watched services.
type follower struct {
	w        *rolloutWatch
	sub      *journal.Subscription
	progress func(control.ApplyProgress) error
	read     uint64 // the last event taken
}

// take hands one event to the watch; false when the client went away.
func (f *follower) take(ev messages.Event) bool {
	f.read = ev.Seq
	return !f.w.event(ev) || f.progress(control.ApplyProgress{Event: &ev}) == nil
}

// catchUp takes every event emitted before the verdict: a service's events
// are queued before its snapshot is published, so the deploy.failed and
// rollout.rolled_back behind a snapshot on the old deployment are read and
// shown, and name the reason. Append with no events waits until the queued
// ones are committed.
func (f *follower) catchUp(ctx context.Context, j *journal.Journal) {
	last, err := j.Append()
	if err != nil {
		return
	}
	for f.read < last {
		select {
		case ev, ok := <-f.sub.Events():
			if !ok || !f.take(ev) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

func (h *handler) Remove(ctx context.Context, args control.RemoveArgs) (control.ChangeResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ChangeResult{}, err
	}
	if err := h.refuseRemoveListed(rt, args.Stack); err != nil {
		rt.deployer.refused(messages.AuditRemove, args.Stack, "", who(ctx), err)
		return control.ChangeResult{Stack: args.Stack}, err
	}
	var vols *volumeRemoval // --volumes: registered first (volumes.go)
	if args.Volumes {
		if vols, err = rt.deployer.removeVolumesWhenGone(args.Stack); err != nil {
			return control.ChangeResult{Stack: args.Stack}, errCode(err)
		}
	}
	ch, err := rt.deployer.Remove(args.Stack, who(ctx))
	res := changeResult(args.Stack, ch)
	if err != nil || vols == nil {
		if vols != nil {
			rt.deployer.dropVolumeRemoval(args.Stack, vols)
		}
		return res, errCode(err)
	}
	return res, awaitVolumes(ctx, vols, &res)
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
	res := changeResult(args.Stack, rb.Changed)
	res.Deployment = strconv.FormatUint(rb.To, 10)
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

func (h *handler) Redeploy(ctx context.Context, args control.ServiceRef) (control.ChangeResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.ChangeResult{}, err
	}
	ch, err := rt.deployer.Redeploy(args.Stack, args.Service, who(ctx))
	return changeResult(args.Stack, ch), errCode(err)
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

// History lists the deploy audit log (issue 17) from the journal.
func (h *handler) History(_ context.Context, args control.HistoryArgs) (control.HistoryResult, error) {
	rt, err := h.running()
	if err != nil {
		return control.HistoryResult{}, err
	}
	entries, err := rt.journal.History(args.Stack, args.Limit)
	if err != nil {
		return control.HistoryResult{}, control.Errorf(control.CodeInternal, "reading the history: %v", err)
	}
	if entries == nil {
		entries = []messages.AuditEntry{}
	}
	return control.HistoryResult{Entries: entries}, nil
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
		if args.Slot == 0 {
			return control.LogsResult{}, control.Errorf(control.CodeNotFound, "%s/%s has no replica now (engenho status %s/%s says why)", args.Stack, args.Service, args.Stack, args.Service)
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

// uniqueNames is names without repeats, in their first order: two files
// that name no stack leave one entry.
func uniqueNames(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
