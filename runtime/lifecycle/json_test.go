package lifecycle

import (
	"encoding/json"
	"errors"
	"reflect"
	"syscall"
	"testing"
	"time"
)

// TestSnapshotJSON: the snapshot carries everything status reports (state,
// phase, retry mode and delay, last error, epoch, attempt) and reads back
// (DMN-13).
func TestSnapshotJSON(t *testing.T) {
	s := New(Config{})
	s.Name, s.Retry, s.RetryDelay = Failed, RetryBackoff, 4*time.Second
	s.Attempt, s.Failures, s.Epoch = 5, 3, 2
	s.LastError = &Failure{Phase: PhaseAdopt, Class: CauseTransient, Reasons: []string{"incus: connection refused"}}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"state": "failed", "retry": "backoff", "retry_delay": "4s", "hold": false,
		"boot_attempt": 5.0, "consecutive_failures": 3.0, "epoch": 2.0,
		"last_error": map[string]any{"phase": "adopt", "class": "transient", "reasons": []any{"incus: connection refused"}},
	}
	if !reflect.DeepEqual(fields, want) {
		t.Fatalf("snapshot JSON\n got  %s\n want %v", data, want)
	}
	var back State
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	back.Config = s.Config
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip: got %+v, want %+v", back, s)
	}
	if err := json.Unmarshal([]byte(`{"state":"failed","retry_delay":"soon"}`), &back); err == nil {
		t.Fatal("a bad retry_delay was accepted")
	}
}

func TestStringForms(t *testing.T) {
	s := New(Config{})
	cases := map[string]State{
		"resolving":          s,
		"booting/adopt":      with(s, func(s *State) { s.Name, s.Phase = Booting, PhaseAdopt }),
		"failed/backoff(4s)": with(s, func(s *State) { s.Name, s.Retry, s.RetryDelay = Failed, RetryBackoff, 4*time.Second }),
		"draining/tree>stopped+hold": with(s, func(s *State) {
			s.Name, s.DrainStep, s.Then, s.Hold = Draining, DrainTree, TargetStopped, true
		}),
	}
	for want, st := range cases {
		if got := st.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

// TestRefusedNamesStateEventReason: a refusal answers with state, event and
// reason (DMN-6), as an error and as JSON.
func TestRefusedNamesStateEventReason(t *testing.T) {
	s := mustStep(t, New(Config{}), HoldPresent{})
	next, fx := Step(s, RetryRequested{})
	r := Refusal(s, RetryRequested{}, fx)
	if r == nil {
		t.Fatalf("got %s, %s", next, effString(fx))
	}
	var err error = r
	var as *Refused
	if !errors.As(err, &as) || as != r {
		t.Fatalf("the refusal is not a *Refused error: %v", err)
	}
	if got, want := err.Error(), "lifecycle: retry refused in stopped: stopped: use start"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
	data, _ := json.Marshal(r)
	if got, want := string(data), `{"state":"stopped","event":"retry","reason":"stopped: use start"}`; got != want {
		t.Fatalf("json %s, want %s", got, want)
	}
	if _, fx := Step(s, nil); Refusal(s, nil, fx) == nil || Refusal(s, nil, fx).Error() != "lifecycle: <nil event> refused in stopped: no event" {
		t.Fatalf("nil event: %s", effString(fx))
	}
}

// TestFromSignal: SIGTERM/SIGINT = exit, SIGHUP = reconfigure (DMN-8).
func TestFromSignal(t *testing.T) {
	for sig, want := range map[syscall.Signal]Event{
		syscall.SIGTERM: ExitRequested{Source: "SIGTERM"},
		syscall.SIGINT:  ExitRequested{Source: "SIGINT"},
		syscall.SIGHUP:  ReconfigureRequested{},
	} {
		if got, ok := FromSignal(sig); !ok || got != want {
			t.Errorf("%v: got %v, %v", sig, got, ok)
		}
	}
	if _, ok := FromSignal(syscall.SIGUSR1); ok {
		t.Error("SIGUSR1 mapped to an event")
	}
}

func TestNewDefaults(t *testing.T) {
	if got := New(Config{}).Config; got != DefaultConfig() {
		t.Fatalf("zero config: %+v", got)
	}
	cfg := Config{DrainBudget: 5 * time.Second, BackoffFirst: 2 * time.Second, BackoffCap: 8 * time.Second}
	if got := New(cfg).Config; got != cfg {
		t.Fatalf("explicit config changed: %+v", got)
	}
	var delays []time.Duration
	for n := 1; n <= 4; n++ {
		delays = append(delays, cfg.backoff(n))
	}
	if want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}; !reflect.DeepEqual(delays, want) {
		t.Fatalf("custom ladder %v, want %v", delays, want)
	}
}
