package replica

import (
	"errors"
	"fmt"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/probe"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Fail-closed recovery (issue 17): SVC-30 withdraw before touch, SVC-31
// stale evidence never publishes, SVC-32 unsafe states refused, SVC-33
// retirement failures reported for the journal. All of it applies only
// with Policy.FailClosed, which the service sets for its replicas.

// Withdrawn is the service's answer to Withdraw (SVC-30).
type Withdrawn = messages.ReplicaWithdrawn

// needsWithdraw holds a touch of the instance (a restart, a stop for
// health, a replacement) until the service has withdrawn it from the
// balancer (SVC-30). It reports whether the touch must wait.
func needsWithdraw(cfg *Config, s *State) bool {
	if !cfg.Policy.FailClosed || cfg.Policy.NoRotation || s.withdrawn {
		return false // nothing to withdraw from, or already withdrawn
	}
	s.Withdraw = true
	return true
}

// withdrawn takes the service's answer: the touch may go ahead. When the
// balancer refused, the service is publication-inhibited and publishes
// nothing new until a withdrawal succeeds; the dead or unhealthy instance
// is still repaired.
func withdrawnDone(s *State, e Withdrawn) {
	if !s.Withdraw {
		return
	}
	s.Withdraw, s.withdrawn = false, true
}

// published marks the instance in rotation: a later touch needs a new
// withdrawal (SVC-30).
func published(s *State, now time.Time) {
	s.InRotation, s.ServingSince = true, now
	s.withdrawn, s.Withdraw = false, false // a request that was waiting is moot
}

// generation is what the instance's labels say it is (SVC-3): its
// revision and deployment.
func generation(st drivers.Status) string {
	return st.Labels[drivers.LabelRevision] + "/" + st.Labels[drivers.LabelDeployment]
}

// verified takes the inspection made between a ready probe and the
// publication (SVC-31). The same run (start time, pid, generation) is
// published; anything else aborts the publication, and the instance is
// verified again as a new run.
func verified(cfg *Config, s *State, e OpDone, now time.Time) []step.Effect {
	s.verify = false
	if e.Err != nil {
		if errors.Is(e.Err, drivers.ErrNotFound) {
			return missing(s)
		}
		s.verify = true // keep the evidence pending: verify again later
		s.LastError = fmt.Sprintf("inspect before publishing: %v", e.Err)
		s.retryAt = now.Add(cfg.Policy.TransientRetry)
		return retryLater(cfg, now)
	}
	st := e.Status
	same := st.State == drivers.StateRunning && st.StartedAt.Equal(s.StartedAt) && st.Pid == s.Pid &&
		generation(st) == s.Generation
	if same && s.Running && s.Health.Status == probe.StatusHealthy {
		published(s, now)
		s.Phase = PhaseServing
		return observeStable(cfg, s, now, true)
	}
	var what string
	switch {
	case st.State != drivers.StateRunning:
		what = fmt.Sprintf("state is now %s", stateName(st.State))
	case !st.StartedAt.Equal(s.StartedAt):
		what = "start time changed"
	case st.Pid != s.Pid:
		what = fmt.Sprintf("pid changed from %d to %d", s.Pid, st.Pid)
	case generation(st) != s.Generation:
		what = fmt.Sprintf("generation changed from %s to %s", s.Generation, generation(st))
	default:
		what = "no longer healthy"
	}
	fx := []step.Effect{step.Emit{Kind: messages.KindRecoveryStale, Level: messages.LevelWarn,
		Message: "not published: " + what + " between the ready probe and publishing; verifying it again"}}
	if st.State == drivers.StateRunning {
		// A new run, as far as the evidence goes: probe it afresh.
		s.StartedAt = time.Time{}
	}
	return append(fx, observe(cfg, s, st, now, false)...)
}

func stateName(st drivers.State) string {
	if st == "" {
		return "none"
	}
	return string(st)
}

// unsafe reports whether recovery refuses to act on an instance found in
// st (SVC-32): paused or frozen, unknown, or with no state at all.
func unsafe(st drivers.State) bool {
	switch st {
	case drivers.StateRunning, drivers.StateStopped, drivers.StateStarting, drivers.StateRestarting:
		return false
	}
	return true
}

// refuse records that recovery refuses to touch the instance (SVC-32): it
// is out of rotation and neither started, stopped nor deleted while it is
// found so; the sweep inspects it again.
func refuse(cfg *Config, s *State, st drivers.Status, now time.Time, was string) []step.Effect {
	s.Refused = fmt.Sprintf("instance %s is in state %s: recovery refuses to restart or delete it", st.Name, stateName(st.State))
	s.LastError = s.Refused
	s.InRotation, s.ServingSince = false, time.Time{}
	s.verify = false
	fx := []step.Effect{step.Arm{Timer: TimerSweep, At: now.Add(refusedRecheck(cfg))}}
	if s.Refused != was {
		fx = append(fx, step.Emit{Kind: messages.KindRecoveryRefused, Level: messages.LevelError, Message: s.Refused})
	}
	return fx
}

// refusedRecheck is how soon an instance in a refused state is inspected
// again: the sweep, at most every TransientRetry.
func refusedRecheck(cfg *Config) time.Duration {
	d := cfg.Policy.TransientRetry
	if d <= 0 {
		d = time.Second
	}
	if cfg.Policy.Sweep > 0 && cfg.Policy.Sweep < d {
		d = cfg.Policy.Sweep
	}
	return d
}

// retiring reports whether the replica is on its way out.
func retiring(s *State) bool { return s.Intent == messages.IntentRetire || s.Replace }
