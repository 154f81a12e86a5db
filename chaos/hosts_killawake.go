package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/engenho/engenho/chaos/schedule"
)

// lossBound is the loss window of a replication class (ACT-9, ACT-17):
// writes acknowledged longer than this before a node crash must survive
// it. stream: a scan every second plus the upload, with a second to
// spare; batched: its 5m period plus that; daily: a day.
func lossBound(class string) time.Duration {
	switch class {
	case "batched":
		return 5*time.Minute + 2*time.Second
	case "daily":
		return 24 * time.Hour
	}
	return 2 * time.Second
}

// writeAck is one acknowledged visit and when its answer came.
type writeAck struct {
	visit int
	at    time.Time
}

// injectKillAwake wakes the host through node x, writes to it (a visit
// every 200ms for 2-4s), then SIGKILLs node x's daemon while the host is
// awake: no final checkpoint, no release (ACT-17). The other node takes
// the host over once the lease expires; awaitHost checks its first visit
// against the loss bound (mayLose: the writes of the last
// streamLossBound), and cleanup measures the loss for the report.
func (c *campaign) injectKillAwake(ctx context.Context, f schedule.Fault, p *hostPair, x int, inj *injected) error {
	n := p.nodes[x]
	v, err := c.visitPatiently(ctx, p, x)
	if err != nil {
		return fmt.Errorf("waking the host through %s: %w", n.name, err)
	}
	inj.violations = append(inj.violations, p.checkVisit(v)...)
	acks := []writeAck{{v, c.clk.Now()}}
	deadline := c.clk.Now().Add(2*time.Second + time.Duration(f.Pick%3)*time.Second)
	for c.clk.Now().Before(deadline) {
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
		v, err := c.visit(ctx, p, x, 5*time.Second)
		if err != nil {
			break // counted ambiguous by visit
		}
		inj.violations = append(inj.violations, p.checkVisit(v)...)
		acks = append(acks, writeAck{v, c.clk.Now()})
	}
	killAt := c.clk.Now()
	p.mayLose = 0
	for _, a := range acks {
		if killAt.Sub(a.at) < lossBound(c.replication()) {
			p.mayLose++
		}
	}
	inj.detail = fmt.Sprintf("node crashed while awake after %d acknowledged writes", len(acks))
	if err := c.crashNode(n, p, inj); err != nil {
		return err
	}
	last, checkedAtKill := acks[len(acks)-1].visit, p.checked
	inj.cleanup = func(context.Context) string {
		// After a takeover p.lastVisit is the first visit the other node
		// served: its restored state held the visit before it.
		if p.checked == checkedAtKill {
			return "no takeover visit to measure the loss"
		}
		restored := p.lastVisit - 1
		lost, span := 0, time.Duration(0)
		for _, a := range acks {
			if a.visit > restored {
				if lost == 0 {
					span = killAt.Sub(a.at)
				}
				lost++
			}
		}
		c.lossWindows = append(c.lossWindows, span)
		return fmt.Sprintf("restored visit %d of %d acknowledged: lost %d writes, the oldest acknowledged %dms before the kill (%s, bound %s)",
			restored, last, lost, span.Milliseconds(), c.replication(), lossBound(c.replication()))
	}
	return nil
}

// replication is the host pairs' replication class: the scenario's, else
// stream.
func (c *campaign) replication() string {
	if c.sc.Replication != "" {
		return c.sc.Replication
	}
	return "stream"
}

// printLossWindows prints the losses daemon.kill-awake measured: how long
// before the kill the oldest lost write was acknowledged (0: nothing lost).
func (c *campaign) printLossWindows() {
	if len(c.lossWindows) == 0 {
		return
	}
	worst := time.Duration(0)
	for _, w := range c.lossWindows {
		worst = max(worst, w)
	}
	c.printf("  loss window (daemon.kill-awake, %s): %d kills, worst %dms, bound %s\n", c.replication(), len(c.lossWindows), worst.Milliseconds(), lossBound(c.replication()))
}

// crashNode makes node n die as a machine would: its daemon SIGKILLed,
// the host's instance and sidecars killed with it, and its local copy of
// the host's data gone (only what was replicated survives). A daemon
// killed alone would find its instance and local copy on relaunch and
// ship them (a daemon crash loses nothing); a node crash is the case
// the replication class bounds. The daemon is then relaunched, empty
// handed, so the pair runs two nodes again.
func (c *campaign) crashNode(n *node, p *hostPair, inj *injected) error {
	old, err := n.relaunch(inj, nil, func() error {
		for _, proc := range markedProcs(c.run) {
			if proc.Service == p.service() {
				_ = killGroup(proc.Pgid)
			}
		}
		local := filepath.Join(n.dataDir(), "hosts", hostName)
		if err := os.RemoveAll(local); err != nil {
			return fmt.Errorf("node %s: removing the local copy: %w", n.name, err)
		}
		os.Remove(local + ".checkpoint")
		return nil
	})
	if err != nil {
		return err
	}
	inj.detail += fmt.Sprintf("; pid %d killed with its host's processes and local copy", old)
	return nil
}
