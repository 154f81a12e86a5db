package controltest

import (
	"context"
	"sync"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// Call is one recorded handler call: the op and its decoded args (nil for
// ops without args).
type Call struct {
	Op   control.Op
	Args any
}

// Fake is a control.Handler with canned answers. Set the fields before the
// server serves; Calls is safe to read at any time. A nil func field takes
// the default behaviour described on it.
type Fake struct {
	// StatusResult is returned by status (filters are not applied).
	StatusResult control.StatusResult
	// TreeResult is returned by tree.
	TreeResult control.TreeResult
	// Why answers why; nil echoes the stack and service with no slots.
	WhyFunc func(control.WhyArgs) (control.WhyResult, error)
	// EventLog is what events replays: entries with Seq > Since, or the
	// last Tail of them. With Follow, events then sends what arrives on
	// Feed until the request ends.
	EventLog []messages.Event
	Feed     chan messages.Event
	// State is the lifecycle state start, stop, restart, retry, exit and
	// reconfigure answer; LifecycleErr, when set, is returned instead.
	State        lifecycle.State
	LifecycleErr error
	// ReconfigureFunc, when set, answers reconfigure instead.
	ReconfigureFunc func() (control.ReconfigureResult, error)
	// EpochResult answers epoch; reinit is refused, as by the daemon's
	// lifecycle, unless its epoch equals EpochResult.Epoch, and answers
	// ReinitResult.
	EpochResult  control.EpochResult
	ReinitResult control.ReinitResult
	// ApplyFunc answers apply; nil returns ApplyResult, after sending Progress
	// when args.Wait is set.
	ApplyFunc   func(control.ApplyArgs, func(control.ApplyProgress) error) (control.ApplyResult, error)
	ApplyResult control.ApplyResult
	Progress    []control.ApplyProgress
	// Changes answers remove, rollback and redeploy.
	Changes control.ChangeResult
	// LogChunks is what logs sends; with Follow it then waits for the
	// request to end.
	LogChunks []control.LogChunk
	// HistoryResult answers history (filters are not applied).
	HistoryResult control.HistoryResult
	// ChaosEnabled: chaos is refused unless set.
	ChaosEnabled bool
	// Err, when set, is what every op without its own error field returns.
	Err error
	// Block, when set, makes status wait for it to close (or the request
	// to end): a way to hold a request in flight.
	Block chan struct{}

	mu    sync.Mutex
	calls []Call
}

var _ control.Handler = (*Fake)(nil)

// Calls returns the calls so far, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

func (f *Fake) record(op control.Op, args any) {
	f.mu.Lock()
	f.calls = append(f.calls, Call{Op: op, Args: args})
	f.mu.Unlock()
}

func answer[R any](f *Fake, op control.Op, args any, r R) (R, error) {
	f.record(op, args)
	if f.Err != nil {
		var zero R
		return zero, f.Err
	}
	return r, nil
}

func (f *Fake) Status(ctx context.Context, a control.StatusArgs) (control.StatusResult, error) {
	if f.Block != nil {
		select {
		case <-f.Block:
		case <-ctx.Done():
			f.record(control.OpStatus, a)
			return control.StatusResult{}, ctx.Err()
		}
	}
	return answer(f, control.OpStatus, a, f.StatusResult)
}

func (f *Fake) Tree(context.Context) (control.TreeResult, error) {
	return answer(f, control.OpTree, nil, f.TreeResult)
}

func (f *Fake) Why(_ context.Context, a control.WhyArgs) (control.WhyResult, error) {
	if f.WhyFunc != nil {
		f.record(control.OpWhy, a)
		return f.WhyFunc(a)
	}
	return answer(f, control.OpWhy, a, control.WhyResult{Stack: a.Stack, Service: a.Service, Slots: []control.WhySlot{}})
}

func (f *Fake) Events(ctx context.Context, a control.EventsArgs, send func(messages.Event) error) (control.EventsResult, error) {
	f.record(control.OpEvents, a)
	if f.Err != nil {
		return control.EventsResult{}, f.Err
	}
	last := a.Since
	log := f.EventLog
	if a.Since == 0 && a.Tail > 0 && len(log) > a.Tail {
		log = log[len(log)-a.Tail:]
	}
	for _, e := range log {
		if e.Seq <= a.Since {
			continue
		}
		if err := send(e); err != nil {
			return control.EventsResult{Last: last}, err
		}
		last = e.Seq
	}
	if !a.Follow {
		return control.EventsResult{Last: last}, nil
	}
	for {
		select {
		case <-ctx.Done():
			return control.EventsResult{Last: last}, nil
		case e := <-f.Feed:
			if err := send(e); err != nil {
				return control.EventsResult{Last: last}, err
			}
			last = e.Seq
		}
	}
}

func (f *Fake) lifecycle(op control.Op, args any) (control.LifecycleResult, error) {
	f.record(op, args)
	if f.LifecycleErr != nil {
		return control.LifecycleResult{}, f.LifecycleErr
	}
	if f.Err != nil {
		return control.LifecycleResult{}, f.Err
	}
	return control.LifecycleResult{State: f.State}, nil
}

func (f *Fake) Start(context.Context) (control.LifecycleResult, error) {
	return f.lifecycle(control.OpStart, nil)
}

func (f *Fake) Stop(_ context.Context, a control.StopArgs) (control.LifecycleResult, error) {
	return f.lifecycle(control.OpStop, a)
}

func (f *Fake) Restart(context.Context) (control.LifecycleResult, error) {
	return f.lifecycle(control.OpRestart, nil)
}

func (f *Fake) Retry(context.Context) (control.LifecycleResult, error) {
	return f.lifecycle(control.OpRetry, nil)
}

func (f *Fake) Exit(context.Context) (control.LifecycleResult, error) {
	return f.lifecycle(control.OpExit, nil)
}

func (f *Fake) Reconfigure(context.Context) (control.ReconfigureResult, error) {
	if f.ReconfigureFunc != nil {
		f.record(control.OpReconfigure, nil)
		return f.ReconfigureFunc()
	}
	r, err := f.lifecycle(control.OpReconfigure, nil)
	return control.ReconfigureResult{State: r.State}, err
}

func (f *Fake) RestartChild(_ context.Context, a control.RestartChildArgs) (control.RestartChildResult, error) {
	return answer(f, control.OpRestartChild, a, control.RestartChildResult{Path: a.Path})
}

func (f *Fake) Epoch(_ context.Context, a control.EpochArgs) (control.EpochResult, error) {
	return answer(f, control.OpEpoch, a, f.EpochResult)
}

func (f *Fake) Reinit(_ context.Context, a control.ReinitArgs) (control.ReinitResult, error) {
	f.record(control.OpReinit, a)
	if a.Epoch != f.EpochResult.Epoch {
		return control.ReinitResult{}, control.Errorf(control.CodeRefused, "the runtime ran since (epoch %d, now %d): nothing moved; run reinit again", a.Epoch, f.EpochResult.Epoch)
	}
	return f.ReinitResult, f.Err
}

func (f *Fake) Apply(_ context.Context, a control.ApplyArgs, progress func(control.ApplyProgress) error) (control.ApplyResult, error) {
	if f.ApplyFunc != nil {
		f.record(control.OpApply, a)
		return f.ApplyFunc(a, progress)
	}
	f.record(control.OpApply, a)
	if f.Err != nil {
		return control.ApplyResult{}, f.Err
	}
	if a.Wait {
		for _, p := range f.Progress {
			if err := progress(p); err != nil {
				return control.ApplyResult{}, err
			}
		}
	}
	r := f.ApplyResult
	r.DryRun = a.DryRun
	return r, nil
}

func (f *Fake) Remove(_ context.Context, a control.RemoveArgs) (control.ChangeResult, error) {
	return answer(f, control.OpRemove, a, f.Changes)
}

func (f *Fake) Scale(_ context.Context, a control.ScaleArgs) (control.ScaleResult, error) {
	return answer(f, control.OpScale, a, control.ScaleResult{Stack: a.Stack, Service: a.Service, From: 1, To: a.Replicas, Changed: a.Replicas != 1})
}

func (f *Fake) History(_ context.Context, a control.HistoryArgs) (control.HistoryResult, error) {
	return answer(f, control.OpHistory, a, f.HistoryResult)
}

func (f *Fake) Rollback(_ context.Context, a control.StackRef) (control.ChangeResult, error) {
	return answer(f, control.OpRollback, a, f.Changes)
}

func (f *Fake) Redeploy(_ context.Context, a control.ServiceRef) (control.ChangeResult, error) {
	return answer(f, control.OpRedeploy, a, f.Changes)
}

func (f *Fake) ServiceStop(_ context.Context, a control.ServiceRef) (control.ServiceIntentResult, error) {
	return answer(f, control.OpServiceStop, a, control.ServiceIntentResult{Stack: a.Stack, Service: a.Service, Stopped: true, Changed: true})
}

func (f *Fake) ServiceStart(_ context.Context, a control.ServiceRef) (control.ServiceIntentResult, error) {
	return answer(f, control.OpServiceStart, a, control.ServiceIntentResult{Stack: a.Stack, Service: a.Service, Changed: true})
}

func (f *Fake) ServiceRetry(_ context.Context, a control.ServiceRef) (control.ServiceIntentResult, error) {
	return answer(f, control.OpServiceRetry, a, control.ServiceIntentResult{Stack: a.Stack, Service: a.Service, Changed: true})
}

func (f *Fake) Logs(ctx context.Context, a control.LogsArgs, send func(control.LogChunk) error) (control.LogsResult, error) {
	f.record(control.OpLogs, a)
	if f.Err != nil {
		return control.LogsResult{}, f.Err
	}
	for _, c := range f.LogChunks {
		if a.Slot != 0 && c.Slot != a.Slot {
			continue
		}
		if err := send(c); err != nil {
			return control.LogsResult{}, err
		}
	}
	if a.Follow {
		<-ctx.Done()
	}
	return control.LogsResult{}, nil
}

func (f *Fake) Chaos(_ context.Context, a control.ChaosArgs) (control.ChaosResult, error) {
	f.record(control.OpChaos, a)
	if !f.ChaosEnabled {
		return control.ChaosResult{}, control.Errorf(control.CodeRefused, "chaos is not enabled on this daemon")
	}
	return control.ChaosResult{Kind: a.Kind, Target: a.Target, Detail: "injected"}, nil
}
