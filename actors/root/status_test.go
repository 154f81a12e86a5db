package root_test

import (
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

// crashStack is issue 13's service: it runs briefly and exits 1.
const crashStack = `
services:
  bad:
    command: ["/bin/sh", "-c", "sleep 0.2; exit 1"]
`

func (e *env) stackConverged() bool {
	for _, st := range e.tree.Board.Stacks() {
		if st.Stack == "web" {
			return st.Converged
		}
	}
	return false
}

// SVC-19, SUP-10..SUP-12 (issue 13): a service whose command exits 1 after
// a while is never shown converged once it crash-loops: neither while its
// retries run at once, nor while it waits on the ladder, nor during the
// runs after each delayed restart; the stack is never converged either.
// Waiting, it is `backoff` with the reason and the next attempt; its
// replica's last error says why; no health.recovered is raised for a run
// that crashes. After 0.2s runs it is never converged once it failed (each
// run ends within the monitor window); after 10s runs, once it has used up
// the 3 retries made at once.
func TestSVC19CrashLoopIsNeverConverged(t *testing.T) {
	cases := []struct {
		sleep string
		from  int // failures from which it is never converged
	}{{"0.2", 1}, {"10", 3}}
	for _, c := range cases {
		t.Run("sleep "+c.sleep, func(t *testing.T) {
			e := newEnv(t)
			e.apply(strings.Replace(crashStack, "0.2", c.sleep, 1))
			checkCrashLoop(t, e, c.from)
		})
	}
}

func checkCrashLoop(t *testing.T, e *env, from int) {
	start := e.clk.Now()
	seen := map[messages.ServiceState]bool{}
	var backoff messages.ServiceStatus
	// 3m10s of fake time: the retries made at once, then the 1m and 2m
	// rungs, each followed by a run.
	for e.clk.Now().Before(start.Add(190 * time.Second)) {
		time.Sleep(200 * time.Microsecond)
		e.clk.Advance(100 * time.Millisecond)
		if e.tree.Events.Count(messages.KindReplicaFailed) < from {
			continue
		}
		st := e.tree.Service("web", "bad")
		seen[st.State] = true
		converged := func() bool {
			return e.tree.Service("web", "bad").State == messages.ServiceConverged || e.stackConverged()
		}
		if converged() && stays(converged) {
			t.Fatalf("at +%s: service %s, stack converged %v: %s\nevents:\n%s\nreplicas %+v", e.clk.Now().Sub(start),
				st.State, e.stackConverged(), st.Message, e.tree.Events, st.Replicas)
		}
		if st.State == messages.ServiceFailing || st.State == messages.ServiceBackoff {
			// The exit is seen by the driver's watch ("exited with code 1") or,
			// when an inspection gets there first under load, by the replica
			// ("found stopped, exit code 1"): both name the exit code.
			if !exitCode1(st.Reason) || !exitCode1(st.Message) {
				t.Fatalf("state %s: reason %q, message %q", st.State, st.Reason, st.Message)
			}
		}
		if st.State == messages.ServiceBackoff && backoff.State == "" {
			backoff = st
		}
	}
	if !seen[messages.ServiceBackoff] || !seen[messages.ServiceFailing] {
		t.Fatalf("states seen %v", seen)
	}
	if backoff.NextAttempt == nil || len(backoff.Replicas) != 1 {
		t.Fatalf("backoff status %+v", backoff)
	}
	r := backoff.Replicas[0]
	// Either observer may name the exit first (see exitCode1); the message
	// quotes whichever did.
	if !exitCode1(r.LastError) || r.Ledger.Failures != 4 || !backoff.NextAttempt.Equal(r.Ledger.NextAttempt) {
		t.Fatalf("replica %+v, next attempt %s", r, backoff.NextAttempt)
	}
	if want := "slot 1: " + r.LastError + " (4 failures)"; backoff.Message != want {
		t.Fatalf("message %q, want %q", backoff.Message, want)
	}
	if n := e.tree.Events.Count(messages.KindHealthRecovered); n != 0 {
		t.Fatalf("%d health.recovered for runs that crashed:\n%s", n, e.tree.Events)
	}
	if n := e.tree.Events.Count(messages.KindReplicaFailed); n < 5 {
		t.Fatalf("only %d failures in 3m10s:\n%s", n, e.tree.Events)
	}
}

// stays reports whether cond holds for a while of real time with the fake
// clock standing still. The test advances the fake clock faster than the
// actors read their mailboxes, so a snapshot may lag a report that is
// still queued; a lagging one is corrected without the clock moving, a
// wrong one is not.
func stays(cond func() bool) bool {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !cond() {
			return false
		}
	}
	return true
}

// SUP-17, issue 13: adding a service to the stack file (a new deployment
// in which this service is unchanged) does not touch the ladder of a
// failing service: no retry, the same restart count, the same next attempt.
func TestSUP17UnrelatedEditKeepsTheLadder(t *testing.T) {
	e := newEnv(t)
	e.apply(crashStack)
	e.until("backing off after 4 failures", func() bool {
		st := e.tree.Service("web", "bad")
		return st.State == messages.ServiceBackoff && len(st.Replicas) == 1 && st.Replicas[0].Ledger.Failures == 4
	})
	before := e.tree.Service("web", "bad").Replicas[0]
	starts := e.drv.Starts(before.Instance)
	e.apply(crashStack + `
  good:
    command: ["server"]
`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st := e.tree.Service("web", "good"); st.State == messages.ServiceConverged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the added service did not converge\nevents:\n%s", e.tree.Events)
		}
		time.Sleep(time.Millisecond) // the fake clock stands still: no ladder delay passes
	}
	time.Sleep(50 * time.Millisecond) // let a wrongly sent retry arrive
	after := e.tree.Service("web", "bad")
	r := after.Replicas[0]
	if e.drv.Starts(before.Instance) != starts || r.Restarts != before.Restarts || r.Ledger.Failures != 4 ||
		!r.Ledger.NextAttempt.Equal(before.Ledger.NextAttempt) || after.State != messages.ServiceBackoff {
		t.Fatalf("after the edit: state %s, starts %d (was %d), restarts %d (was %d), ledger %+v (was %+v)",
			after.State, e.drv.Starts(before.Instance), starts, r.Restarts, before.Restarts, r.Ledger, before.Ledger)
	}
	if after.Deployment != "d2" {
		t.Fatalf("deployment %s, want d2", after.Deployment)
	}
}

const probedV1 = `
services:
  api:
    command: ["server"]
    healthcheck:
      test: ["CMD-SHELL", "echo v1 ok"]
      interval: 1s
      retries: 2
    deploy:
      replicas: 2
      update_config:
        order: start-first
        failure_action: rollback
`

// SVC-13 (issue 13): a new instance whose healthcheck fails `retries`
// times after start_period (interval 1s, retries 2) fails its slot about
// 1s after start_period, not after the whole deadline
// (max(start_period, 60s) + 2 × 1s + 30s = 92s), and rollback applies at
// once: the old revision keeps serving. Times are on the fake clock.
func TestSVC13UnhealthyRolloutFailsFast(t *testing.T) {
	cases := []struct {
		startPeriod string
		min, max    time.Duration
	}{{"0s", 0, 3 * time.Second}, {"5s", 5 * time.Second, 8 * time.Second}}
	for _, c := range cases {
		t.Run("start_period "+c.startPeriod, func(t *testing.T) {
			e := newEnv(t)
			v1yaml := strings.Replace(probedV1, "retries: 2", "retries: 2\n      start_period: "+c.startPeriod, 1)
			e.apply(v1yaml)
			e.until("converged", func() bool { return e.tree.Converged("web") })
			v1 := e.tree.Service("web", "api").Revision
			applied := e.clk.Now()
			e.apply(strings.Replace(v1yaml, "echo v1 ok", "echo v2 is broken; exit 1", 1))
			e.until("deploy.failed", func() bool { return e.tree.Events.Count(messages.KindDeployFailed) == 1 })
			var failed messages.Event
			for _, ev := range e.tree.Events.All() {
				if ev.Kind == messages.KindDeployFailed {
					failed = ev
				}
			}
			took := time.UnixMilli(failed.UnixMs).Sub(applied)
			if took < c.min || took > c.max || !strings.Contains(failed.Message, "turned unhealthy: v2 is broken") {
				t.Fatalf("deploy.failed after %s of fake time (want %s..%s): %s", took, c.min, c.max, failed.Message)
			}
			if e.tree.Events.Count(messages.KindRolloutRolledBack) != 1 {
				t.Fatalf("no rollback:\n%s", e.tree.Events)
			}
			e.until("converged on v1", func() bool {
				st := e.tree.Service("web", "api")
				return e.tree.Converged("web") && st.Revision == v1 && len(st.Replicas) == 2
			})
		})
	}
}

func exitCode1(s string) bool {
	return strings.Contains(s, "exited with code 1") || strings.Contains(s, "found stopped, exit code 1")
}
