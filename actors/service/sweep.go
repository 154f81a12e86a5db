package service

import (
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
)

// The sweep (SVC-8, SVC-9): every Env.Sweep the service lists its
// instances with one driver call and compares each running replica's
// instance with what the replica last reported: an instance that is
// gone, no longer running, or whose run began at another time than the
// replica knows, gets its replica a messages.ReplicaSweep, and the
// replica inspects it and acts as before. An instance that is as its
// replica knows it costs a comparison: before, every replica inspected
// its own instance on its own timer, two actor messages, a timer and a
// driver call per replica and sweep, the most of an idle node's CPU at
// 10,000 replicas (PERF-3).

// sweepTimer is the shell's timer of the sweep.
const sweepTimer = "sweep"

// armSweep arms the next sweep, when there is a sweep interval.
func (a *Actor) armSweep() {
	if a.env.Sweep > 0 {
		a.timers.Arm(sweepTimer, a.h.Clock().Now().Add(a.env.Sweep))
	}
}

// sweep lists the instances, unless the last listing is still under way
// (a hung driver call is bounded by the step timeout; the next sweep
// waits for it).
func (a *Actor) sweep() {
	if a.sweeping {
		a.armSweep()
		return
	}
	a.sweeping = true
	a.listing(true)
}

// swept compares the listing with the replicas' last reports and asks
// the replicas whose instance differs to inspect it. A listing that
// failed asks nothing: the next sweep lists again.
func (a *Actor) swept(m messages.ServiceListed) {
	a.sweeping = false
	defer a.armSweep()
	if m.Err != nil {
		a.h.Log().Debug().Err(m.Err).Msg("sweep: listing instances failed; trying again at the next sweep")
		return
	}
	listed := make(map[string]*drivers.Status, len(m.Instances))
	for i := range m.Instances {
		listed[m.Instances[i].Name] = &m.Instances[i]
	}
	for id, v := range a.views {
		r, ok := a.s.Replicas[id]
		if !ok || !running(r) || v.Instance == "" {
			continue
		}
		if st := listed[v.Instance]; st != nil && st.State == drivers.StateRunning && st.StartedAt.Equal(v.StartedAt) {
			continue
		}
		if pid := a.kids.PID(childName(r)); pid != nil {
			a.h.Engine().Send(pid, messages.ReplicaSweep{})
		}
	}
	a.adoptOrphans(m.Instances)
}
