package clock

import (
	"context"
	"time"
)

// WithTimeout is context.WithTimeout on clk: the context ends when d has
// passed on clk, so a fake clock can time out a hung call in a test.
func WithTimeout(clk Clock, parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := clk.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}
