package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"github.com/engenho/engenho/chaos/schedule"
)

// injectStopAwake wakes the host through node x and writes to it, then
// freezes x's daemon (SIGSTOP) for longer than the lease's TTL while the
// campaign visits through the other node, which takes the host over once
// the lease has expired (ACT-14). Then x runs again (SIGCONT): it must
// fence itself at once, answering nothing from its stale copy (its gate
// refuses past the lease's validity on its own clock), and stand down.
// Every visit is checked (checkpoint-intact) and both nodes' views are
// polled for single-awake throughout by awaitHost.
func (c *campaign) injectStopAwake(ctx context.Context, f schedule.Fault, p *hostPair, x int, inj *injected) error {
	n := p.nodes[x]
	v, err := c.visitPatiently(ctx, p, x)
	if err != nil {
		return fmt.Errorf("waking the host through %s: %w", n.name, err)
	}
	inj.violations = append(inj.violations, p.checkVisit(v)...)
	// Let the stream replication ship the visit (≤1s, ACT-9).
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	pid := n.currentPid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %d: %w", pid, err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer thaw()
	// The other node wakes the host once the lease expires.
	v, err = c.visitPatiently(ctx, p, 1-x)
	if err != nil {
		return fmt.Errorf("node %s frozen: the host did not move to %s: %w", n.name, p.nodes[1-x].name, err)
	}
	inj.violations = append(inj.violations, p.checkVisit(v)...)
	// The other node could take over only once the lease's record had
	// expired, so the frozen node's own validity has passed too.
	if err := sleep(ctx, time.Duration(f.Pick%3)*time.Second); err != nil {
		return err
	}
	thaw()
	// At once, through the node that was frozen: it must not serve from
	// its stale copy (a served visit is checked: it would repeat a number).
	v, err = c.visit(ctx, p, x, 10*time.Second)
	if err == nil {
		inj.violations = append(inj.violations, p.checkVisit(v)...)
	}
	inj.detail = fmt.Sprintf("node %s (pid %d) frozen with the host awake until %s took it over, then thawed; its first answer: %s",
		n.name, pid, p.nodes[1-x].name, answer(err))
	return nil
}

// answer describes a visit's outcome.
func answer(err error) string {
	var se *statusError
	switch {
	case err == nil:
		return "200 (it served)"
	case errors.As(err, &se) && se.code == http.StatusServiceUnavailable:
		return "503 (fenced)"
	default:
		return err.Error()
	}
}
