package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/engenho/engenho/chaos/invariant"
)

// awaitSpec says what recovery from one fault means.
type awaitSpec struct {
	bound time.Duration
	// witness, when set, must see the fault take effect before a
	// converged look counts as recovery (a kill not yet noticed leaves the
	// status converged). After witnessFor it is given up with a note.
	witness func(observation) bool
	// acks are the intents acknowledged before a daemon SIGKILL (REL-3).
	acks []invariant.Ack
	// before, when set, is the look before the fault; touched says which
	// slots the fault may change. Every other healthy replica must be
	// untouched.
	before  *observation
	touched func(service string, slot int) bool
}

// witnessFor is how long a fault's effect may take to show.
const witnessFor = 10 * time.Second

// await polls n until every invariant holds or the bound passes. It
// returns whether the node recovered, when, the violations (safety ones
// seen on the way, plus, when it did not recover, the liveness ones of the
// last look) and a note.
func (c *campaign) await(ctx context.Context, n *node, start time.Time, a awaitSpec) (bool, time.Time, []invariant.Violation, string) {
	var safety []invariant.Violation
	seen := map[string]bool{}
	addSafety := func(vs []invariant.Violation) {
		for _, v := range invariant.Safety(vs) {
			if !seen[v.String()] {
				seen[v.String()] = true
				safety = append(safety, v)
			}
		}
	}
	witnessed, note := a.witness == nil, ""
	var last []invariant.Violation
	var lastErr error
	for c.clk.Since(start) < a.bound {
		if ctx.Err() != nil {
			return false, time.Time{}, append(safety, last...), "interrupted"
		}
		looked := c.clk.Now()
		obs, err := c.observe(ctx, n, false)
		if took := c.clk.Since(looked); took > 5*time.Second && note == "" {
			note = fmt.Sprintf("one look at the daemon took %s", took.Round(time.Millisecond))
		}
		if err != nil {
			lastErr = err
			c.progress(start, []invariant.Violation{{Invariant: "observe", Subject: n.name, Evidence: err.Error()}})
			_ = sleep(ctx, poll)
			continue
		}
		lastErr = nil
		addSafety(invariant.CheckStopped(c.want, obs.instances, nil))
		if !witnessed {
			if a.witness(obs) {
				witnessed = true
			} else if c.clk.Since(start) < witnessFor {
				_ = sleep(ctx, poll)
				continue
			} else {
				witnessed, note = true, "the fault's effect was not seen"
			}
		}
		last = c.liveness(obs, a.acks)
		c.progress(start, last)
		if len(last) == 0 {
			obs.procs, obs.hasProcs = c.ownProcs(), true
			last = append(invariant.CheckOrphans(c.want, obs.instances, obs.procs),
				invariant.CheckStopped(c.want, nil, obs.procs)...)
		}
		if len(last) == 0 {
			if a.before != nil && a.touched != nil {
				addSafety(invariant.CheckUntouched(a.before.instances, obs.instances, a.before.healthy(), a.touched))
			}
			return true, obs.at, safety, note
		}
		_ = sleep(ctx, poll)
	}
	if lastErr != nil {
		last = append(last, invariant.Violation{Invariant: invariant.Converged, Subject: "node " + n.name,
			Evidence: "the daemon did not answer: " + lastErr.Error()})
	}
	return false, time.Time{}, append(safety, last...), note
}

// liveness lists what must hold once the node has recovered.
func (c *campaign) liveness(obs observation, acks []invariant.Ack) []invariant.Violation {
	var out []invariant.Violation
	out = append(out, invariant.CheckConverged(c.want, obs.status.Services)...)
	out = append(out, invariant.CheckOnePerSlot(c.want, obs.status.Services, obs.instances)...)
	out = append(out, invariant.CheckStopped(c.want, obs.instances, nil)...)
	out = append(out, invariant.CheckAcknowledged(acks, obs.status.Services)...)
	return out
}

// progress prints, in verbose mode, what a wait is still waiting for,
// every few seconds.
func (c *campaign) progress(start time.Time, waiting []invariant.Violation) {
	if !c.opts.Verbose || len(waiting) == 0 || c.clk.Since(c.lastProgress) < 3*time.Second {
		return
	}
	c.lastProgress = c.clk.Now()
	c.printf("chaos:   after %s still waiting for:\n", c.clk.Since(start).Round(time.Millisecond))
	for i, v := range waiting {
		if i == 5 {
			c.printf("chaos:     ... and %d more\n", len(waiting)-5)
			break
		}
		c.printf("chaos:     %s\n", v)
	}
}
