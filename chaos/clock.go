package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/engenho/engenho/chaos/schedule"
	"github.com/engenho/engenho/runtime/control"
)

// jumpClock moves n's wall clock by d (the chaos op clock; its monotonic
// clock runs on).
func jumpClock(ctx context.Context, n *node, d time.Duration) error {
	_, err := n.chaos(ctx, control.ChaosArgs{Kind: "clock", Params: map[string]string{"jump": d.String()}})
	return err
}

// resetClock undoes every jump of n's wall clock.
func resetClock(ctx context.Context, n *node) error {
	_, err := n.chaos(ctx, control.ChaosArgs{Kind: "clock", Params: map[string]string{"reset": "1"}})
	return err
}

// jumpOf is a fault's jump: offset_s seconds, forward or back.
func jumpOf(f schedule.Fault) time.Duration { return time.Duration(f.Param("offset_s")) * time.Second }

// injectClockJump jumps node a's wall clock by offset_s, kills one replica
// of a process service so its restart, ladder and stable window run across
// the jump, holds hold_ms, then undoes the jump (a second jump, the other
// way). Durations and deadlines run on the monotonic clock and must not
// notice: the replica comes back at once and nothing else restarts.
func (c *campaign) injectClockJump(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	d := jumpOf(f)
	if err := jumpClock(ctx, c.a, d); err != nil {
		return err
	}
	inj.cleanup = func(ctx context.Context) string {
		if err := resetClock(ctx, c.a); err != nil {
			return "the clock could not be set back: " + err.Error()
		}
		return ""
	}
	if err := c.killInstance(f, before, "process", inj); err != nil {
		_ = resetClock(ctx, c.a)
		return err
	}
	inj.detail = fmt.Sprintf("wall clock moved %s, then %s", d, inj.detail)
	if err := sleep(ctx, time.Duration(f.Param("hold_ms"))*time.Millisecond); err != nil {
		return err
	}
	return nil
}

// injectClockJumpAwake wakes the host through node x, jumps x's wall clock
// by offset_s while it holds the lease and serves (renews and stream
// checkpoints run across the jump), and the other node's by the opposite
// way (a taker whose wall clock disagrees with the holder's must still
// not take a lease the holder renews, ACT-14), visits through x for a few
// seconds, then undoes both jumps. single-awake is polled throughout by
// awaitHost and every visit is checked.
func (c *campaign) injectClockJumpAwake(ctx context.Context, f schedule.Fault, p *hostPair, x int, inj *injected) error {
	n, other := p.nodes[x], p.nodes[1-x]
	v, err := c.visitPatiently(ctx, p, x)
	if err != nil {
		return fmt.Errorf("waking the host through %s: %w", n.name, err)
	}
	inj.violations = append(inj.violations, p.checkVisit(v)...)
	d := jumpOf(f)
	inj.cleanup = func(ctx context.Context) string {
		for _, m := range p.nodes {
			if err := resetClock(ctx, m); err != nil {
				return "the clock of " + m.name + " could not be set back: " + err.Error()
			}
		}
		return ""
	}
	if err := jumpClock(ctx, n, d); err != nil {
		return err
	}
	if err := jumpClock(ctx, other, -d); err != nil {
		return err
	}
	served := 0
	deadline := c.clk.Now().Add(time.Duration(f.Param("hold_ms")) * time.Millisecond)
	for c.clk.Now().Before(deadline) {
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return err
		}
		v, err := c.visit(ctx, p, x, 10*time.Second)
		if err != nil {
			continue // a 503 while it renews or moves is no violation; a lost write would be
		}
		served++
		inj.violations = append(inj.violations, p.checkVisit(v)...)
	}
	inj.detail = fmt.Sprintf("%s's wall clock moved %s and %s's %s while the host was awake; %d visits served through %s",
		n.name, d, other.name, -d, served, n.name)
	return nil
}
