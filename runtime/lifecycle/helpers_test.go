package lifecycle

import (
	"fmt"
	"strings"
	"time"

	"github.com/engenho/engenho/messages/step"
)

// effString is the tests' short form of a step's effects: "none", or each
// effect's String joined by ", ".
func effString(fx []step.Effect) string {
	if len(fx) == 0 {
		return "none"
	}
	parts := make([]string, len(fx))
	for i, f := range fx {
		parts[i] = fmt.Sprint(f)
	}
	return strings.Join(parts, ", ")
}

// only is a step's one effect, nil for none; more than one fails the test
// (the loop performs one effect per step, DMN-6).
func only(t interface {
	Helper()
	Fatalf(format string, args ...any)
}, fx []step.Effect) step.Effect {
	t.Helper()
	switch len(fx) {
	case 0:
		return nil
	case 1:
		return fx[0]
	}
	t.Fatalf("%d effects (%s), want at most one", len(fx), effString(fx))
	return nil
}

// refused reports whether Step refuses e in s.
func refused(s State, e Event) bool {
	_, fx := Step(s, e)
	return Refusal(s, e, fx) != nil
}

// label is the test's own short name for a state: name, sub-state, pending
// target, hold and stale flags. Two states with the same label behave the
// same for every event.
func label(s State) string {
	var b strings.Builder
	b.WriteString(string(s.Name))
	switch s.Name {
	case Booting:
		b.WriteString("/" + string(s.Phase))
	case Draining, Wedged:
		b.WriteString("/" + string(s.DrainStep))
	case Failed:
		b.WriteString("/" + string(s.Retry))
	}
	if s.Then != TargetNone {
		b.WriteString(">" + string(s.Then))
		if s.Then == TargetFailed {
			b.WriteString("/" + string(s.Retry))
		}
	}
	if s.Hold {
		b.WriteString("+hold")
	}
	if s.ConfigStale {
		b.WriteString("~stale")
	}
	return b.String()
}

// validate checks the invariants every reachable state keeps.
func validate(s State) error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if (s.Phase != "") != (s.Name == Booting) {
		bad("phase %q in %s", s.Phase, s.Name)
	}
	if s.Name == Booting && phaseIndex(s.Phase) < 0 {
		bad("unknown phase %q", s.Phase)
	}
	if (s.DrainStep != "") != (s.Name == Draining || s.Name == Wedged) {
		bad("drain step %q in %s", s.DrainStep, s.Name)
	}
	switch s.Name {
	case Draining:
		if s.Then == TargetNone {
			bad("draining without a target")
		}
	case Wedged:
		if s.Then == TargetNone || s.Then == TargetExit {
			bad("wedged towards %q", s.Then)
		}
	case Booting:
	default:
		if s.Then != TargetNone {
			bad("target %q in %s", s.Then, s.Name)
		}
	}
	if s.Name == Failed && s.Retry != RetryBackoff && s.Retry != RetryHold {
		bad("failed with retry %q", s.Retry)
	}
	if s.Name != Failed && s.Then != TargetFailed && s.Retry != "" {
		bad("retry %q in %s>%s", s.Retry, s.Name, s.Then)
	}
	if s.Then == TargetFailed && s.Retry == "" {
		bad("pending failure without retry mode")
	}
	if (s.RetryDelay > 0) != (s.Name == Failed && s.Retry == RetryBackoff) {
		bad("retry delay %s in %s/%s", s.RetryDelay, s.Name, s.Retry)
	}
	if s.ConfigStale && s.Name != Booting && s.Then != TargetFailed {
		bad("config stale in %s>%s", s.Name, s.Then)
	}
	if s.Hold && s.Name != Stopped && s.Name != Exiting && s.Then != TargetStopped && s.Then != TargetExit {
		bad("hold in %s>%s", s.Name, s.Then)
	}
	if s.Name == Running && (s.LastError != nil || s.Failures != 0) {
		bad("running with last error %v, failures %d", s.LastError, s.Failures)
	}
	if s.Failures < 0 || s.Attempt < 0 {
		bad("negative counters")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %s", s, strings.Join(problems, "; "))
	}
	return nil
}

// wantDelay is the spec's backoff: 1s doubling to 60s (DMN-7).
func wantDelay(failures int) time.Duration {
	d := time.Second
	for i := 1; i < failures; i++ {
		d *= 2
		if d >= 60*time.Second {
			return 60 * time.Second
		}
	}
	return d
}
