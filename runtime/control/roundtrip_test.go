package control_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/control/controltest"
	"github.com/engenho/engenho/runtime/lifecycle"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// TestDMN12EveryOpRoundTrips calls every op through a real socket and a
// client against the fake handler: the handler gets the args the client
// sent, the client gets the result the handler returned.
func TestDMN12EveryOpRoundTrips(t *testing.T) {
	running := lifecycle.State{Name: lifecycle.Running, Epoch: 3, Attempt: 1}
	f := &controltest.Fake{
		StatusResult: control.StatusResult{
			Daemon:   control.DaemonStatus{Lifecycle: running, PID: 42, Node: control.NodeIdentity{Name: "n1", ID: "abc"}, StartedAt: t0},
			Stacks:   []messages.StackStatus{{Stack: "web", Deployment: "d1", Converged: true, Services: []string{"api"}, UpdatedAt: t0}},
			Services: []messages.ServiceStatus{{Stack: "web", Service: "api", State: messages.ServiceConverged, Desired: 1, Running: 1, Healthy: 1, UpdatedAt: t0}},
		},
		TreeResult:   control.TreeResult{Nodes: []supervise.Node{{Path: "root", Gen: 1, State: "running", Since: t0}}},
		State:        running,
		EpochResult:  control.EpochResult{State: lifecycle.State{Name: lifecycle.Stopped, Epoch: 3}, Epoch: 3, Allowed: true, Moves: []string{"/d/journal"}},
		ReinitResult: control.ReinitResult{What: "journal", Moved: []string{"/d/attic/x/journal"}},
		ApplyResult:  control.ApplyResult{Stacks: []control.StackPlan{{Stack: "web", Changes: []stackfile.Change{{Service: "api", Action: stackfile.ActionCreate, ToRevision: "r1", ToReplicas: 2}}}}},
		Changes:      control.ChangeResult{Stack: "web", Changes: []stackfile.Change{{Service: "api", Action: stackfile.ActionRemove}}},
		EventLog:     []messages.Event{{Seq: 1, Kind: messages.KindDaemonBooted, Message: "up"}, {Seq: 2, Kind: messages.KindDeploySucceeded, Message: "ok"}},
		LogChunks:    []control.LogChunk{{Slot: 1, Text: "hello\n"}},
		ChaosEnabled: true,
		HistoryResult: control.HistoryResult{Entries: []messages.AuditEntry{{Seq: 1, UnixMs: 5, Op: "apply", Stack: "web",
			By: messages.AuditBy{UID: 0, User: "root"}, ToDeployment: 1, ToRevisions: map[string]string{"api": "r1"}, Outcome: messages.AuditOK}}},
		WhyFunc: func(a control.WhyArgs) (control.WhyResult, error) {
			return control.WhyResult{Stack: a.Stack, Service: a.Service, State: messages.ServiceFailing,
				Slots: []control.WhySlot{{Slot: 2, Phase: "down", HasLedger: true, Ledger: messages.Ledger{Failures: 3, LastReason: "exit 1", NextAttempt: t0}}}}, nil
		},
	}
	s := serve(t, f, nil)
	c := dial(t, s.path)
	ctx := ctx(t)

	type check struct {
		op   control.Op
		args any // what the handler must have received
		call func() (any, error)
		want any
	}
	var events []messages.Event
	var logs []control.LogChunk
	ref := control.ServiceRef{Stack: "web", Service: "api"}
	lc := control.LifecycleResult{State: running}
	checks := []check{
		{control.OpStatus, control.StatusArgs{Stack: "web"}, func() (any, error) { return c.Status(ctx, control.StatusArgs{Stack: "web"}) }, f.StatusResult},
		{control.OpTree, nil, func() (any, error) { return c.Tree(ctx) }, f.TreeResult},
		{control.OpWhy, control.WhyArgs{Stack: "web", Service: "api", Slot: 2}, func() (any, error) {
			return c.Why(ctx, control.WhyArgs{Stack: "web", Service: "api", Slot: 2})
		}, control.WhyResult{Stack: "web", Service: "api", State: messages.ServiceFailing,
			Slots: []control.WhySlot{{Slot: 2, Phase: "down", HasLedger: true, Ledger: messages.Ledger{Failures: 3, LastReason: "exit 1", NextAttempt: t0}}}}},
		{control.OpEvents, control.EventsArgs{Since: 1}, func() (any, error) {
			return c.Events(ctx, control.EventsArgs{Since: 1}, func(e messages.Event) error { events = append(events, e); return nil })
		}, control.EventsResult{Last: 2}},
		{control.OpStart, nil, func() (any, error) { return c.Start(ctx) }, lc},
		{control.OpStop, control.StopArgs{Hold: true}, func() (any, error) { return c.Stop(ctx, control.StopArgs{Hold: true}) }, lc},
		{control.OpRestart, nil, func() (any, error) { return c.Restart(ctx) }, lc},
		{control.OpRetry, nil, func() (any, error) { return c.Retry(ctx) }, lc},
		{control.OpExit, nil, func() (any, error) { return c.Exit(ctx) }, lc},
		{control.OpReconfigure, nil, func() (any, error) { return c.Reconfigure(ctx) }, control.ReconfigureResult{State: running}},
		{control.OpRestartChild, control.RestartChildArgs{Path: "root/stack:web"}, func() (any, error) {
			return c.RestartChild(ctx, control.RestartChildArgs{Path: "root/stack:web"})
		}, control.RestartChildResult{Path: "root/stack:web"}},
		{control.OpEpoch, control.EpochArgs{What: "journal"}, func() (any, error) { return c.Epoch(ctx, control.EpochArgs{What: "journal"}) }, f.EpochResult},
		{control.OpReinit, control.ReinitArgs{What: "journal", Epoch: 3}, func() (any, error) {
			return c.Reinit(ctx, control.ReinitArgs{What: "journal", Epoch: 3})
		}, f.ReinitResult},
		{control.OpApply, control.ApplyArgs{Files: []control.ApplyFile{{Name: "web.yaml", Content: "services: {}"}}, DryRun: true}, func() (any, error) {
			return c.Apply(ctx, control.ApplyArgs{Files: []control.ApplyFile{{Name: "web.yaml", Content: "services: {}"}}, DryRun: true}, nil)
		}, control.ApplyResult{DryRun: true, Stacks: f.ApplyResult.Stacks}},
		{control.OpRemove, control.RemoveArgs{Stack: "web", Volumes: true}, func() (any, error) {
			return c.Remove(ctx, control.RemoveArgs{Stack: "web", Volumes: true})
		}, f.Changes},
		{control.OpScale, control.ScaleArgs{Stack: "web", Service: "api", Replicas: 5}, func() (any, error) {
			return c.Scale(ctx, control.ScaleArgs{Stack: "web", Service: "api", Replicas: 5})
		}, control.ScaleResult{Stack: "web", Service: "api", From: 1, To: 5, Changed: true}},
		{control.OpRollback, control.StackRef{Stack: "web"}, func() (any, error) { return c.Rollback(ctx, control.StackRef{Stack: "web"}) }, f.Changes},
		{control.OpRedeploy, ref, func() (any, error) { return c.Redeploy(ctx, ref) }, f.Changes},
		{control.OpServiceStop, ref, func() (any, error) { return c.ServiceStop(ctx, ref) }, control.ServiceIntentResult{Stack: "web", Service: "api", Stopped: true, Changed: true}},
		{control.OpServiceStart, ref, func() (any, error) { return c.ServiceStart(ctx, ref) }, control.ServiceIntentResult{Stack: "web", Service: "api", Changed: true}},
		{control.OpLogs, control.LogsArgs{Stack: "web", Service: "api", Slot: 1, Lines: 10}, func() (any, error) {
			return c.Logs(ctx, control.LogsArgs{Stack: "web", Service: "api", Slot: 1, Lines: 10}, func(l control.LogChunk) error { logs = append(logs, l); return nil })
		}, control.LogsResult{}},
		{control.OpHistory, control.HistoryArgs{Stack: "web", Limit: 5}, func() (any, error) {
			return c.History(ctx, control.HistoryArgs{Stack: "web", Limit: 5})
		}, f.HistoryResult},
		{control.OpChaos, control.ChaosArgs{Kind: "kill", Target: "web/api/1", Params: map[string]string{"signal": "9"}}, func() (any, error) {
			return c.Chaos(ctx, control.ChaosArgs{Kind: "kill", Target: "web/api/1", Params: map[string]string{"signal": "9"}})
		}, control.ChaosResult{Kind: "kill", Target: "web/api/1", Detail: "injected"}},
	}
	seen := map[control.Op]bool{}
	for i, ch := range checks {
		t.Run(string(ch.op), func(t *testing.T) {
			got, err := ch.call()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normal(got), normal(ch.want)) {
				t.Errorf("result\n got %+v\nwant %+v", got, ch.want)
			}
			calls := f.Calls()
			if len(calls) != i+1 {
				t.Fatalf("handler calls = %d, want %d", len(calls), i+1)
			}
			last := calls[i]
			if last.Op != ch.op || !reflect.DeepEqual(last.Args, ch.args) {
				t.Errorf("handler got %s %+v, want %s %+v", last.Op, last.Args, ch.op, ch.args)
			}
		})
		seen[ch.op] = true
	}
	if want := []messages.Event{f.EventLog[1]}; !reflect.DeepEqual(events, want) {
		t.Errorf("events streamed = %+v, want %+v", events, want)
	}
	if !reflect.DeepEqual(logs, f.LogChunks) {
		t.Errorf("logs streamed = %+v, want %+v", logs, f.LogChunks)
	}
	for _, op := range allOps {
		if !seen[op] && op != control.OpCancel {
			t.Errorf("op %s has no round-trip check", op)
		}
	}
}

// allOps lists every op the package declares.
var allOps = []control.Op{
	control.OpStatus, control.OpTree, control.OpWhy, control.OpEvents, control.OpStart, control.OpStop,
	control.OpRestart, control.OpRetry, control.OpExit, control.OpReconfigure, control.OpRestartChild,
	control.OpEpoch, control.OpReinit, control.OpApply, control.OpRemove, control.OpScale, control.OpRollback,
	control.OpRedeploy, control.OpServiceStop, control.OpServiceStart, control.OpLogs, control.OpChaos, control.OpHistory, control.OpCancel,
}

// normal compares times by instant (JSON drops the monotonic reading).
func normal(v any) string { return fmt.Sprintf("%+v", v) }

// TestDMN12ApplyWaitStreamsProgress: apply --wait gets the plan, then each
// service's progress, then the outcome (SVC-5).
func TestDMN12ApplyWaitStreamsProgress(t *testing.T) {
	f := &controltest.Fake{
		Progress: []control.ApplyProgress{
			{Planned: []control.StackPlan{{Stack: "web", Changes: []stackfile.Change{{Service: "api", Action: stackfile.ActionUpdate}}}}},
			{Service: &messages.ServiceStatus{Stack: "web", Service: "api", State: messages.ServiceUpdating}},
			{Service: &messages.ServiceStatus{Stack: "web", Service: "api", State: messages.ServiceFailing, FailureOutput: "boom"}},
		},
		ApplyResult: control.ApplyResult{Outcome: control.OutcomeFailed, Failed: []messages.ServiceStatus{{Stack: "web", Service: "api", State: messages.ServiceFailing}}},
	}
	s := serve(t, f, nil)
	c := dial(t, s.path)
	var got []control.ApplyProgress
	res, err := c.Apply(ctx(t), control.ApplyArgs{Files: []control.ApplyFile{{Name: "a.yaml", Content: "x"}}, Wait: true}, func(p control.ApplyProgress) error {
		got = append(got, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Planned == nil || got[2].Service.FailureOutput != "boom" {
		t.Errorf("progress = %+v", got)
	}
	if res.Outcome != control.OutcomeFailed || len(res.Failed) != 1 {
		t.Errorf("result = %+v", res)
	}
}

// TestDMN11HandlerErrorsKeepTheirCode: an *Error keeps its code, a refused
// lifecycle transition becomes refused with state/event/reason, anything
// else is internal; errors.Is works on the client side.
func TestDMN11HandlerErrorsKeepTheirCode(t *testing.T) {
	cases := []struct {
		err     error
		code    control.Code
		details map[string]string
	}{
		{control.Errorf(control.CodeNotFound, "stack web: not deployed"), control.CodeNotFound, nil},
		{&lifecycle.Refused{State: lifecycle.State{Name: lifecycle.Stopped}, Event: lifecycle.RetryRequested{}, Reason: "stopped: use start"},
			control.CodeRefused, map[string]string{"state": "stopped", "event": "retry", "reason": "stopped: use start"}},
		{fmt.Errorf("wrapped: %w", control.Errorf(control.CodeConflict, "epoch moved")), control.CodeConflict, nil},
		{errors.New("disk on fire"), control.CodeInternal, nil},
	}
	for _, tc := range cases {
		f := &controltest.Fake{LifecycleErr: tc.err}
		s := serve(t, f, nil)
		c := dial(t, s.path)
		_, err := c.Retry(ctx(t))
		var e *control.Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Fatalf("%v: got %v, want code %s", tc.err, err, tc.code)
		}
		if !errors.Is(err, &control.Error{Code: tc.code}) {
			t.Errorf("errors.Is by code failed for %v", err)
		}
		if tc.details != nil && !reflect.DeepEqual(e.Details, tc.details) {
			t.Errorf("details = %v, want %v", e.Details, tc.details)
		}
	}
}

// TestDMN11HandlerPanicIsInternal: a panicking handler answers internal, is
// logged, and the connection and server keep serving.
func TestDMN11HandlerPanicIsInternal(t *testing.T) {
	h := &panicky{Fake: &controltest.Fake{}}
	s := serve(t, h, nil)
	c := dial(t, s.path)
	if _, err := c.Tree(ctx(t)); !errors.Is(err, control.ErrInternal) {
		t.Fatalf("tree on a panicking handler: %v, want internal", err)
	}
	if _, err := c.Status(ctx(t), control.StatusArgs{}); err != nil {
		t.Fatalf("status after a panic: %v", err)
	}
	if !contains(s.log.String(), "handler panicked") {
		t.Errorf("panic not logged: %s", s.log.String())
	}
}

type panicky struct{ *controltest.Fake }

func (p *panicky) Tree(context.Context) (control.TreeResult, error) { panic("bug") }

// TestPERF7BatchesAndStreamsKeepTheirOrder: a status of many batches and a
// long event stream arrive whole and in order although the client decodes
// lines on several goroutines.
func TestPERF7BatchesAndStreamsKeepTheirOrder(t *testing.T) {
	st := bigStatus(237)
	f := &controltest.Fake{StatusResult: st}
	for i := 1; i <= 500; i++ {
		f.EventLog = append(f.EventLog, messages.Event{Seq: uint64(i), Kind: "k", Message: fmt.Sprint(i)})
	}
	s := serve(t, f, nil)
	c := dial(t, s.path)
	got, err := c.Status(ctx(t), control.StatusArgs{})
	if err != nil {
		t.Fatal(err)
	}
	if normal(got) != normal(st) {
		t.Fatalf("status of %d services came back different (%d services)", len(st.Services), len(got.Services))
	}
	var seqs []uint64
	if _, err := c.Events(ctx(t), control.EventsArgs{}, func(e messages.Event) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, seq)
		}
	}
	if len(seqs) != 500 {
		t.Fatalf("%d events, want 500", len(seqs))
	}
}

// TestDMN11ConnectionErrorsReachTheClient: a connection the daemon turns
// away fails the client's call with the daemon's reason, not "EOF".
func TestDMN11ConnectionErrorsReachTheClient(t *testing.T) {
	s := serve(t, newFake(), func(o *control.Options) { o.MaxConns = 1 })
	first := dial(t, s.path)
	if _, err := first.Tree(ctx(t)); err != nil {
		t.Fatal(err)
	}
	second := dial(t, s.path)
	_, err := second.Tree(ctx(t))
	if !errors.Is(err, control.ErrBusy) || !strings.Contains(err.Error(), "too many connections (1)") {
		t.Fatalf("turned-away client: %v", err)
	}
}
