package control

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/engenho/engenho/messages"
)

// opSpec is how the server runs one op: decode and validate the args, then
// call the handler. emit sends one stream item (its ID and More are set by
// the connection).
type opSpec struct {
	// streaming ops send items and may run until cancelled.
	streaming bool
	decode    func(raw json.RawMessage) (any, *Error)
	run       func(ctx context.Context, h Handler, args any, emit func(outLine) error) (any, error)
}

// ops is the op table. OpCancel is answered by the connection itself.
var ops = map[Op]*opSpec{
	OpStatus:       statusOp(),
	OpTree:         nullary(Handler.Tree),
	OpWhy:          unary(Handler.Why),
	OpEvents:       stream(Handler.Events, func(e messages.Event) outLine { return outLine{Event: &e} }),
	OpStart:        nullary(Handler.Start),
	OpStop:         unary(Handler.Stop),
	OpRestart:      nullary(Handler.Restart),
	OpRetry:        nullary(Handler.Retry),
	OpExit:         nullary(Handler.Exit),
	OpReconfigure:  nullary(Handler.Reconfigure),
	OpRestartChild: unary(Handler.RestartChild),
	OpEpoch:        unary(Handler.Epoch),
	OpReinit:       unary(Handler.Reinit),
	OpApply:        stream(Handler.Apply, func(p ApplyProgress) outLine { return outLine{Progress: &p} }),
	OpRemove:       unary(Handler.Remove),
	OpScale:        unary(Handler.Scale),
	OpRollback:     unary(Handler.Rollback),
	OpRedeploy:     unary(Handler.Redeploy),
	OpServiceStop:  unary(Handler.ServiceStop),
	OpServiceStart: unary(Handler.ServiceStart),
	OpServiceRetry: unary(Handler.ServiceRetry),
	OpLogs:         stream(Handler.Logs, func(c LogChunk) outLine { return outLine{Log: &c} }),
	OpChaos:        unary(Handler.Chaos),
	OpHistory:      unary(Handler.History),
	OpCancel:       {decode: decodeArgs[CancelArgs]},
}

// opNames lists the known ops, sorted, for error messages.
func opNames() []string {
	names := make([]string, 0, len(ops))
	for op := range ops {
		names = append(names, string(op))
	}
	slices.Sort(names)
	return names
}

func unary[A validator, R any](call func(Handler, context.Context, A) (R, error)) *opSpec {
	return &opSpec{
		decode: decodeArgs[A],
		run: func(ctx context.Context, h Handler, args any, _ func(outLine) error) (any, error) {
			return call(h, ctx, args.(A))
		},
	}
}

func nullary[R any](call func(Handler, context.Context) (R, error)) *opSpec {
	return &opSpec{
		decode: decodeArgs[noArgs],
		run: func(ctx context.Context, h Handler, _ any, _ func(outLine) error) (any, error) {
			return call(h, ctx)
		},
	}
}

func stream[A validator, I, R any](call func(Handler, context.Context, A, func(I) error) (R, error), wrap func(I) outLine) *opSpec {
	return &opSpec{
		streaming: true,
		decode:    decodeArgs[A],
		run: func(ctx context.Context, h Handler, args any, emit func(outLine) error) (any, error) {
			return call(h, ctx, args.(A), func(item I) error { return emit(wrap(item)) })
		},
	}
}

// statusOp sends the services in batches of statusBatch as stream lines,
// then the daemon and the stacks as the result; the client puts the
// services back in order (SVC-19, PERF-7).
func statusOp() *opSpec {
	return &opSpec{
		decode: decodeArgs[StatusArgs],
		run: func(ctx context.Context, h Handler, args any, emit func(outLine) error) (any, error) {
			res, err := h.Status(ctx, args.(StatusArgs))
			if err != nil {
				return nil, err
			}
			for batch := range slices.Chunk(res.Services, statusBatch) {
				if err := emit(outLine{Services: batch}); err != nil {
					return nil, err
				}
			}
			res.Services = nil
			return res, nil
		},
	}
}
