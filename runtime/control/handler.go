package control

import (
	"context"

	"github.com/engenho/engenho/messages"
)

// Handler is what the daemon implements: one typed method per op. The
// server has decoded and validated the arguments (names, allow-lists,
// bounds) before a method is called, so a method sees only well-formed
// input.
//
// Errors: return an *Error (Errorf) to choose the wire code; a
// *lifecycle.Refused becomes a refused error with state, event and reason
// in its details; any other error becomes internal with its text as the
// message, so it must not carry secrets (SEC-2). A panic is recovered and
// answered as internal.
//
// ctx ends when the client goes away (closes, or cancels the request) or
// the server closes. It bounds streaming and waiting only: a method that
// has begun a change (a journal write) completes it whatever ctx says, so
// nothing is half-applied.
//
// Reads (Status, Tree, Why, Epoch) must answer from published snapshots and
// never wait on the lifecycle loop or an actor (DMN-13).
//
// Streaming methods call send for each item and return the final result;
// they return when the stream is over or ctx is done. send fails once the
// client is gone; the method then returns (its error is not sent).
type Handler interface {
	Status(ctx context.Context, args StatusArgs) (StatusResult, error)
	Tree(ctx context.Context) (TreeResult, error)
	Why(ctx context.Context, args WhyArgs) (WhyResult, error)
	Events(ctx context.Context, args EventsArgs, send func(messages.Event) error) (EventsResult, error)

	Start(ctx context.Context) (LifecycleResult, error)
	Stop(ctx context.Context, args StopArgs) (LifecycleResult, error)
	Restart(ctx context.Context) (LifecycleResult, error)
	Retry(ctx context.Context) (LifecycleResult, error)
	Exit(ctx context.Context) (LifecycleResult, error)
	Reconfigure(ctx context.Context) (ReconfigureResult, error)
	RestartChild(ctx context.Context, args RestartChildArgs) (RestartChildResult, error)
	Epoch(ctx context.Context, args EpochArgs) (EpochResult, error)
	Reinit(ctx context.Context, args ReinitArgs) (ReinitResult, error)

	Apply(ctx context.Context, args ApplyArgs, progress func(ApplyProgress) error) (ApplyResult, error)
	Remove(ctx context.Context, args RemoveArgs) (ChangeResult, error)
	Scale(ctx context.Context, args ScaleArgs) (ScaleResult, error)
	Rollback(ctx context.Context, args StackRef) (ChangeResult, error)
	Redeploy(ctx context.Context, args ServiceRef) (ChangeResult, error)
	ServiceStop(ctx context.Context, args ServiceRef) (ServiceIntentResult, error)
	ServiceStart(ctx context.Context, args ServiceRef) (ServiceIntentResult, error)
	// ServiceRetry clears the service's backoff so the next pass makes a
	// fresh attempt (SUP-17).
	ServiceRetry(ctx context.Context, args ServiceRef) (ServiceIntentResult, error)
	Logs(ctx context.Context, args LogsArgs, send func(LogChunk) error) (LogsResult, error)

	// History lists the deploy audit log (issue 17): the newest
	// args.Limit entries of args.Stack (every stack when empty), newest
	// last. A read: it answers from the journal, never from the tree.
	History(ctx context.Context, args HistoryArgs) (HistoryResult, error)

	// Chaos injects a fault; a daemon without chaos enabled refuses it.
	Chaos(ctx context.Context, args ChaosArgs) (ChaosResult, error)
}
