package daemon

import (
	"strings"
	"testing"

	"github.com/engenho/engenho/runtime/lifecycle"
)

// DMN-12: a call refused because the runtime is not running says what it
// is doing (the boot phase too) and only points at `engenho start` when
// that is what brings the runtime up.
func TestNotRunningSaysWhatTheRuntimeDoes(t *testing.T) {
	cases := []struct {
		st        lifecycle.State
		want      string
		startHint bool
	}{
		{lifecycle.State{Name: lifecycle.Booting, Phase: lifecycle.PhaseAdopt}, "booting/adopt", false},
		{lifecycle.State{Name: lifecycle.Stopped}, "stopped", true},
		{lifecycle.State{Name: lifecycle.Failed, Retry: lifecycle.RetryHold}, "failed/", true},
		{lifecycle.State{Name: lifecycle.Draining, DrainStep: lifecycle.DrainTree}, "draining/", false},
	}
	for _, c := range cases {
		got := notRunning(c.st)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.st.Name, got, c.want)
		}
		if hint := strings.Contains(got, "engenho start"); hint != c.startHint {
			t.Errorf("%s: %q: start hint %v, want %v", c.st.Name, got, hint, c.startHint)
		}
	}
}
