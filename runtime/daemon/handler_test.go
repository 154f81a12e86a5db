package daemon

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/journal"
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

// REL-5: a journal write the disk failed is the node's trouble, not the
// caller's: it answers unavailable (retry), like a full disk, never
// invalid.
func TestAFailedJournalWriteAnswersUnavailable(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("scale shop/web: %w: %w", errRecording, &journal.WriteError{Dir: "/d/journal", Err: syscall.EIO}),
		fmt.Errorf("stop: %w", &journal.NoSpaceError{Dir: "/d/journal", Free: 1, Reserve: 2}),
	} {
		var ce *control.Error
		if !errors.As(errCode(err), &ce) || ce.Code != control.CodeUnavailable {
			t.Errorf("errCode(%v) = %v, want code %s", err, errCode(err), control.CodeUnavailable)
		}
	}
}
