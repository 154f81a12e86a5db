package control

import (
	"context"

	"github.com/engenho/engenho/messages"
)

// One method per op. Streaming calls hand each item to their callback; a
// callback that returns an error ends the stream (the request is cancelled
// on the server) and the call returns that error.

// Status gathers the service batches and the final result into one
// StatusResult.
func (c *Client) Status(ctx context.Context, a StatusArgs) (StatusResult, error) {
	var services []messages.ServiceStatus
	res, err := streamCall[StatusResult](c, ctx, OpStatus, a, func(r Response) ([]messages.ServiceStatus, bool) {
		return r.Services, r.Services != nil
	}, func(batch []messages.ServiceStatus) error {
		services = append(services, batch...)
		return nil
	})
	if err != nil {
		return StatusResult{}, err
	}
	res.Services = services
	return res, nil
}

func (c *Client) Tree(ctx context.Context) (TreeResult, error) {
	return call[TreeResult](c, ctx, OpTree, nil)
}

func (c *Client) Why(ctx context.Context, a WhyArgs) (WhyResult, error) {
	return call[WhyResult](c, ctx, OpWhy, a)
}

func (c *Client) Events(ctx context.Context, a EventsArgs, each func(messages.Event) error) (EventsResult, error) {
	return streamCall[EventsResult](c, ctx, OpEvents, a, func(r Response) (messages.Event, bool) {
		if r.Event == nil {
			return messages.Event{}, false
		}
		return *r.Event, true
	}, each)
}

func (c *Client) Start(ctx context.Context) (LifecycleResult, error) {
	return call[LifecycleResult](c, ctx, OpStart, nil)
}

func (c *Client) Stop(ctx context.Context, a StopArgs) (LifecycleResult, error) {
	return call[LifecycleResult](c, ctx, OpStop, a)
}

func (c *Client) Restart(ctx context.Context) (LifecycleResult, error) {
	return call[LifecycleResult](c, ctx, OpRestart, nil)
}

func (c *Client) Retry(ctx context.Context) (LifecycleResult, error) {
	return call[LifecycleResult](c, ctx, OpRetry, nil)
}

func (c *Client) Exit(ctx context.Context) (LifecycleResult, error) {
	return call[LifecycleResult](c, ctx, OpExit, nil)
}

func (c *Client) Reconfigure(ctx context.Context) (ReconfigureResult, error) {
	return call[ReconfigureResult](c, ctx, OpReconfigure, nil)
}

func (c *Client) RestartChild(ctx context.Context, a RestartChildArgs) (RestartChildResult, error) {
	return call[RestartChildResult](c, ctx, OpRestartChild, a)
}

func (c *Client) Epoch(ctx context.Context, a EpochArgs) (EpochResult, error) {
	return call[EpochResult](c, ctx, OpEpoch, a)
}

func (c *Client) Reinit(ctx context.Context, a ReinitArgs) (ReinitResult, error) {
	return call[ReinitResult](c, ctx, OpReinit, a)
}

// Apply deploys; with a.Wait, progress gets each ApplyProgress item (nil
// progress ignores them).
func (c *Client) Apply(ctx context.Context, a ApplyArgs, progress func(ApplyProgress) error) (ApplyResult, error) {
	if progress == nil {
		progress = func(ApplyProgress) error { return nil }
	}
	return streamCall[ApplyResult](c, ctx, OpApply, a, func(r Response) (ApplyProgress, bool) {
		if r.Progress == nil {
			return ApplyProgress{}, false
		}
		return *r.Progress, true
	}, progress)
}

func (c *Client) Remove(ctx context.Context, a RemoveArgs) (ChangeResult, error) {
	return call[ChangeResult](c, ctx, OpRemove, a)
}

func (c *Client) Scale(ctx context.Context, a ScaleArgs) (ScaleResult, error) {
	return call[ScaleResult](c, ctx, OpScale, a)
}

// History lists the deploy audit log (issue 17), newest last.
func (c *Client) History(ctx context.Context, a HistoryArgs) (HistoryResult, error) {
	return call[HistoryResult](c, ctx, OpHistory, a)
}

func (c *Client) Rollback(ctx context.Context, a StackRef) (ChangeResult, error) {
	return call[ChangeResult](c, ctx, OpRollback, a)
}

func (c *Client) Redeploy(ctx context.Context, a ServiceRef) (ChangeResult, error) {
	return call[ChangeResult](c, ctx, OpRedeploy, a)
}

func (c *Client) ServiceStop(ctx context.Context, a ServiceRef) (ServiceIntentResult, error) {
	return call[ServiceIntentResult](c, ctx, OpServiceStop, a)
}

func (c *Client) ServiceStart(ctx context.Context, a ServiceRef) (ServiceIntentResult, error) {
	return call[ServiceIntentResult](c, ctx, OpServiceStart, a)
}

// ServiceRetry clears a service's backoff (SUP-17).
func (c *Client) ServiceRetry(ctx context.Context, a ServiceRef) (ServiceIntentResult, error) {
	return call[ServiceIntentResult](c, ctx, OpServiceRetry, a)
}

func (c *Client) Logs(ctx context.Context, a LogsArgs, each func(LogChunk) error) (LogsResult, error) {
	return streamCall[LogsResult](c, ctx, OpLogs, a, func(r Response) (LogChunk, bool) {
		if r.Log == nil {
			return LogChunk{}, false
		}
		return *r.Log, true
	}, each)
}

func (c *Client) Chaos(ctx context.Context, a ChaosArgs) (ChaosResult, error) {
	return call[ChaosResult](c, ctx, OpChaos, a)
}
