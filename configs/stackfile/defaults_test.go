package stackfile

import (
	"reflect"
	"testing"
	"time"
)

// Every default of the spec, read off a service that sets nothing:
// SUP-10 (ladder 3 immediate, 1m 2m 4m 8m, cap 15m, no jitter), SUP-11
// (stable 5m), SUP-14 (2 unhealthy), SUP-15 (3 restarts before replace),
// SVC-11 (step 2m), SVC-12 (parallelism 1, stop-first), SVC-13 (monitor
// 5s, pause), SVC-16 (drain 10s), SVC-20 (20s), SUP-16 (condition any, no
// cap), Compose (stop grace 10s), and the healthcheck timings chosen here.
func TestDefaultsSUP10SUP11SUP14SVC11SVC12SVC13(t *testing.T) {
	st := mustParse(t, "d.yaml", "services:\n  a:\n    command: run\n")
	s := st.Services["a"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"driver", s.Driver, "process"},
		{"replicas", s.Deploy.Replicas, 1},
		{"stop_grace_period", s.StopGracePeriod, 10 * time.Second},
		{"healthcheck kind", s.Healthcheck.Kind, ProbeNone},
		{"healthcheck interval", s.Healthcheck.Interval, 10 * time.Second},
		{"healthcheck timeout", s.Healthcheck.Timeout, 5 * time.Second},
		{"healthcheck retries", s.Healthcheck.Retries, 3},
		{"healthcheck start_period", s.Healthcheck.StartPeriod, time.Duration(0)},
		{"healthcheck start_interval", s.Healthcheck.StartInterval, 2 * time.Second},
		{"restart condition", s.Deploy.RestartPolicy.Condition, "any"},
		{"restart max_attempts", s.Deploy.RestartPolicy.MaxAttempts, 0},
		{"restart window", s.Deploy.RestartPolicy.Window, time.Duration(0)},
		{"restart delay", s.Deploy.RestartPolicy.Delay, time.Duration(0)},
		{"update parallelism", s.Deploy.UpdateConfig.Parallelism, 1},
		{"update delay", s.Deploy.UpdateConfig.Delay, time.Duration(0)},
		{"update order", s.Deploy.UpdateConfig.Order, "stop-first"},
		{"update failure_action", s.Deploy.UpdateConfig.FailureAction, "pause"},
		{"update monitor", s.Deploy.UpdateConfig.Monitor, 5 * time.Second},
		{"resources", s.Deploy.Resources, Resources{}},
		{"backoff immediate", s.Engenho.Backoff.Immediate, 3},
		{"backoff delays", s.Engenho.Backoff.Delays, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute}},
		{"backoff cap", s.Engenho.Backoff.Cap, 15 * time.Minute},
		{"backoff jitter", s.Engenho.Backoff.Jitter, 0.0},
		{"stable", s.Engenho.Stable, 5 * time.Minute},
		{"step_timeout", s.Engenho.StepTimeout, 2 * time.Minute},
		{"unhealthy_threshold", s.Engenho.UnhealthyThreshold, 2},
		{"restarts_before_replace", s.Engenho.RestartsBeforeReplace, 3},
		{"drain", s.Engenho.Drain, 10 * time.Second},
		{"unhealthy_event_after", s.Engenho.UnhealthyEventAfter, 20 * time.Second},
		{"host", s.EdgeHost(), ""},
		{"hibernate", s.Hibernate == nil, true},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// ACT-3, ACT-8, ACT-11 and the hibernate intro: hibernate and sidecar
// defaults.
func TestDefaultsHibernateSidecarACT3ACT8ACT11(t *testing.T) {
	st := mustParse(t, "d.yaml", `services:
  a:
    command: run
    ports: ["80"]
    hibernate: {host: a.localhost}
    sidecars:
      - {name: s, command: [s]}
`)
	s := st.Services["a"]
	h := s.Hibernate
	if h.Idle != 15*time.Minute || h.Replication != "batched" || h.WakeTimeout != 30*time.Second || h.Port != 80 || h.DataDir != "" || h.Seed != nil {
		t.Errorf("hibernate defaults: %+v", *h)
	}
	if s.StopGracePeriod != 20*time.Second {
		t.Errorf("a hibernating service's stop grace: %v, want 20s (ACT-8)", s.StopGracePeriod)
	}
	sc := s.Sidecars[0]
	if sc.StopGracePeriod != 5*time.Second || sc.AlwaysOn || sc.MaxRun != 0 ||
		sc.Backoff != (SidecarBackoff{Initial: 2 * time.Second, Cap: time.Minute, ResetAfter: time.Minute}) {
		t.Errorf("sidecar defaults: %+v", sc)
	}
}

// SUP-10: the ladder, step by step: 3 at once, then 1m, 2m, 4m, 8m, and
// 15m for every later failure.
func TestBackoffDelaySUP10(t *testing.T) {
	b := NewService("a").Engenho.Backoff
	want := []time.Duration{0, 0, 0, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute, 15 * time.Minute, 15 * time.Minute}
	for i, w := range want {
		if got := b.Delay(i + 1); got != w {
			t.Errorf("failure %d: %v, want %v", i+1, got, w)
		}
	}
	if b.Delay(1000) != 15*time.Minute || b.Delay(0) != 0 {
		t.Error("far failures must wait the cap; failure 0 waits nothing")
	}
	capped := Backoff{Immediate: 0, Delays: []time.Duration{time.Hour}, Cap: time.Minute}
	if capped.Delay(1) != time.Minute {
		t.Error("a delay above the cap is capped")
	}
}

// SVC-13: the rollout deadline max(start_period, 60s) + interval × retries + 30s.
func TestHealthDeadlineSVC13(t *testing.T) {
	hc := defaultHealthcheck()
	hc.Kind = ProbeHTTP
	if got := hc.Deadline(); got != 60*time.Second+30*time.Second+30*time.Second {
		t.Errorf("default deadline %v", got)
	}
	hc.StartPeriod, hc.Interval, hc.Retries = 2*time.Minute, 5*time.Second, 4
	if got := hc.Deadline(); got != 2*time.Minute+20*time.Second+30*time.Second {
		t.Errorf("deadline %v", got)
	}
	if got := defaultHealthcheck().Deadline(); got != 90*time.Second {
		t.Errorf("no healthcheck: %v, want 90s", got)
	}
}
