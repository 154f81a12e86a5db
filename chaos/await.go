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
	// status converged). Not seen within the bound is a fault-effect
	// violation, unless mayBeInvisible: then it is given up after
	// witnessFor with a note.
	witness        func(observation) bool
	mayBeInvisible bool
	// acks are the intents acknowledged before a daemon SIGKILL (REL-3).
	acks []invariant.Ack
	// before, when set, is the look before the fault; touched says which
	// slots the fault may change. Every other healthy replica must be
	// untouched.
	before  *observation
	touched func(service string, slot int) bool
}

// witnessFor is how long the effect of a fault that may have none is
// looked for.
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
	lying := lasting{}
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
		addSafety(lying.outlast(invariant.CheckServingIsRunning(obs.status.Services, obs.instances), obs.at, servingGrace))
		if !witnessed {
			if a.witness(obs) {
				witnessed = true
			} else if !a.mayBeInvisible || c.clk.Since(start) < witnessFor {
				_ = sleep(ctx, poll)
				continue
			} else {
				witnessed, note = true, "the fault's effect was not seen (this kind may have none)"
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
	if !witnessed && ctx.Err() == nil {
		last = append(last, invariant.Violation{Invariant: invariant.FaultEffect, Subject: "node " + n.name,
			Evidence: fmt.Sprintf("the fault's effect was not seen within %s", a.bound)})
	}
	return false, time.Time{}, append(safety, last...), note
}

// servingGrace is how long status may go on calling a replica serving
// after the driver's own list has its run ended: the daemon sees an exit
// at once (the driver's watch), an incus container's within a sweep and
// an inspection, which a loaded incusd can make take seconds.
const servingGrace = 5 * time.Second

// lasting tracks violations seen look after look: one that has held for
// longer than a grace becomes a safety violation, reported once.
type lasting map[string]*held

type held struct {
	first    time.Time
	reported bool
}

// outlast returns the violations of vs that have held since at least
// grace before now and were not reported yet, marked safety; those no
// longer seen are forgotten.
func (l lasting) outlast(vs []invariant.Violation, now time.Time, grace time.Duration) []invariant.Violation {
	var out []invariant.Violation
	seen := map[string]bool{}
	for _, v := range vs {
		k := v.String()
		seen[k] = true
		h, ok := l[k]
		if !ok {
			l[k] = &held{first: now}
			continue
		}
		if !h.reported && now.Sub(h.first) >= grace {
			h.reported = true
			v.Safety = true
			v.Evidence += fmt.Sprintf(" (for at least %s)", grace)
			out = append(out, v)
		}
	}
	for k := range l {
		if !seen[k] {
			delete(l, k)
		}
	}
	return out
}

// liveness lists what must hold once the node has recovered.
func (c *campaign) liveness(obs observation, acks []invariant.Ack) []invariant.Violation {
	var out []invariant.Violation
	out = append(out, invariant.CheckConverged(c.want, obs.status.Services)...)
	out = append(out, invariant.CheckOnePerSlot(c.want, obs.status.Services, obs.instances)...)
	out = append(out, invariant.CheckServingIsRunning(obs.status.Services, obs.instances)...)
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
