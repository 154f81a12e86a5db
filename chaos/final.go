package chaos

import (
	"context"
	"encoding/json"
	"syscall"
	"time"

	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/runtime/control"
)

// leakSlack is how many goroutines a daemon may have after a campaign
// beyond a fresh daemon with nothing deployed: control connections and
// idle keep-alive connections come and go.
const leakSlack = 12

// finalChecks stops everything and checks what is left (CHS-3): no
// instance or marked process after every stack is removed, and no more
// goroutines in the daemon than a fresh one has.
func (c *campaign) finalChecks(ctx context.Context) {
	c.printf("chaos: final checks: the hosts' last checkpoints, then removing every stack\n")
	for _, p := range c.pairs {
		vs, err := c.quiet(ctx, p)
		c.rep.Final = append(c.rep.Final, vs...)
		if err != nil {
			c.rep.Final = append(c.rep.Final, invariant.Violation{Invariant: invariant.Converged, Subject: hostName, Evidence: err.Error()})
		}
		for _, n := range p.nodes {
			c.removeStacks(ctx, n)
			if err := n.exit(ctx, time.Minute); err != nil {
				c.rep.Final = append(c.rep.Final, invariant.Violation{Invariant: invariant.NoOrphans, Subject: "node " + n.name, Evidence: err.Error()})
			}
		}
	}
	c.removeStacks(ctx, c.a)
	c.want = invariant.Want{}
	ok, _, vs, _ := c.await(ctx, c.a, c.clk.Now(), awaitSpec{bound: 2 * time.Minute})
	c.rep.Final = append(c.rep.Final, vs...)
	if !ok {
		return
	}
	c.rep.Final = append(c.rep.Final, c.checkLeaks(ctx)...)
	if err := c.a.exit(ctx, time.Minute); err != nil {
		c.rep.Final = append(c.rep.Final, invariant.Violation{Invariant: invariant.NoOrphans, Subject: "daemon", Evidence: err.Error()})
	}
	if procs := markedProcs(c.run); len(procs) > 0 {
		c.rep.Final = append(c.rep.Final, invariant.CheckOrphans(invariant.Want{}, nil, procs)...)
	}
}

// checkLeaks compares the campaign's daemon, everything removed, with a
// fresh daemon on the same config and nothing deployed. Goroutines that
// end late (idle connections) get until the bound.
func (c *campaign) checkLeaks(ctx context.Context) []invariant.Violation {
	fresh, err := c.newNode("fresh", c.sc.Plant)
	if err == nil {
		c.fresh = fresh
		err = fresh.start(ctx)
	}
	if err != nil {
		return []invariant.Violation{{Invariant: invariant.NoLeaks, Subject: "daemon", Evidence: "the baseline daemon did not start: " + err.Error()}}
	}
	defer func() { _ = fresh.exit(ctx, time.Minute) }()
	_ = sleep(ctx, 2*time.Second) // let its boot settle
	base, err := goroutines(ctx, fresh)
	if err != nil {
		return []invariant.Violation{{Invariant: invariant.NoLeaks, Subject: "daemon", Evidence: "baseline: " + err.Error()}}
	}
	var vs []invariant.Violation
	deadline := c.clk.Now().Add(2 * time.Minute)
	for c.clk.Now().Before(deadline) {
		now, err := goroutines(ctx, c.a)
		if err != nil {
			vs = []invariant.Violation{{Invariant: invariant.NoLeaks, Subject: "daemon", Evidence: err.Error()}}
		} else if vs = invariant.CheckGoroutines(base, now, leakSlack); len(vs) == 0 {
			return nil
		}
		if sleep(ctx, time.Second) != nil {
			break
		}
	}
	return vs
}

func goroutines(ctx context.Context, n *node) (map[string]int, error) {
	res, err := n.chaos(ctx, control.ChaosArgs{Kind: "goroutines"})
	if err != nil {
		return nil, err
	}
	var m map[string]int
	return m, json.Unmarshal([]byte(res.Detail), &m)
}

// killGroup sends SIGKILL to a process group (teardown of leftovers).
func killGroup(pgid int) error {
	if pgid <= 1 {
		return nil
	}
	return syscall.Kill(-pgid, syscall.SIGKILL)
}
