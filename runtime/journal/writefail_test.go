package journal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/drivertest/faultfs"
	"github.com/engenho/engenho/messages"
)

// openOnFaultFS opens a journal whose directory is on a fault file system,
// or skips the test with the reason when FUSE cannot be mounted here. The
// journal is closed before the file system is unmounted.
func openOnFaultFS(t *testing.T) (*Journal, *faultfs.Child) {
	t.Helper()
	dir := t.TempDir()
	f := faultfs.StartT(t, t.TempDir(), dir)
	j, _ := openTest(t, filepath.Join(dir, "journal"), nil)
	return j, f
}

// failWrites switches the disk's failure on or off.
func failWrites(t *testing.T, f *faultfs.Child, on bool) {
	t.Helper()
	if _, err := f.FailWrites(on); err != nil {
		t.Fatal(err)
	}
}

// afterCrash opens a copy of what the disk holds of the journal now, as a
// SIGKILL of the daemon would leave it.
func afterCrash(t *testing.T, f *faultfs.Child) *Journal {
	t.Helper()
	crashed := filepath.Join(t.TempDir(), "journal")
	copyDir(t, filepath.Join(f.Backing(), "journal"), crashed)
	j, _ := openTest(t, crashed, nil)
	return j
}

func stopped(t *testing.T, j *Journal, service string) bool {
	t.Helper()
	s, err := j.IsStopped("shop", service)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// REL-3, REL-5: a write the disk fails (EIO) is refused with
// ErrWriteFailed, is not in force afterwards (badger had already put it in
// its memory table), the journal refuses writes while the disk fails, and
// once the disk writes again everything acknowledged survives a crash:
// also what was acknowledged after the failure, which the write-ahead log
// alone would lose (the pages written during the failure never reached
// the disk and replay stops at them).
func TestAWriteTheDiskFailsIsUndoneAndLaterWritesSurviveACrash(t *testing.T) {
	j, f := openOnFaultFS(t)
	if err := j.StopService("shop", "before"); err != nil {
		t.Fatal(err)
	}
	failWrites(t, f, true)
	for i := range 12 { // more than a page of log written while the disk fails
		err := j.StopServiceAudited("shop", fmt.Sprintf("during-%d", i), nil,
			&messages.AuditEntry{Op: "service-stop", Stack: "shop", Message: strings.Repeat("x", 600)})
		if !errors.Is(err, ErrWriteFailed) {
			t.Fatalf("stop during the failure: %v, want ErrWriteFailed", err)
		}
		if i == 0 && !strings.Contains(err.Error(), "input/output error") {
			t.Errorf("error %q does not say what the disk answered", err)
		}
	}
	if !j.Unsynced() {
		t.Error("Unsynced() = false after a failed write")
	}
	if stopped(t, j, "during-0") {
		t.Error("a refused stop is in force")
	}
	failWrites(t, f, false)
	if err := j.StopService("shop", "after"); err != nil {
		t.Fatalf("stop once the disk writes again: %v", err)
	}
	if j.Unsynced() {
		t.Error("Unsynced() = true after a write went through")
	}
	crashed := afterCrash(t, f)
	for svc, want := range map[string]bool{"before": true, "during-0": false, "during-11": false, "after": true} {
		if got := stopped(t, crashed, svc); got != want {
			t.Errorf("after a crash, shop/%s stopped = %v, want %v", svc, got, want)
		}
	}
}

// The event log goes on after a commit the disk fails: the events of that
// commit are reported lost by the next event recorded, and sequence
// numbers stay gapless.
func TestTheEventLogGoesOnAfterTheDiskFailsACommit(t *testing.T) {
	j, f := openOnFaultFS(t)
	ev := messages.Event{Kind: messages.KindDaemonState, Actor: "test", Message: "one"}
	first, err := j.Append(ev)
	if err != nil {
		t.Fatal(err)
	}
	failWrites(t, f, true)
	if err := j.Emit(ev); err != nil {
		t.Fatalf("Emit during the failure: %v", err)
	}
	if _, err := j.Append(ev); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("Append during the failure: %v, want ErrWriteFailed", err)
	}
	failWrites(t, f, false)
	last, err := j.Append(ev)
	if err != nil {
		t.Fatalf("Append once the disk writes again: %v", err)
	}
	evs, err := j.EventsAfter(first-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i, e := range evs {
		kinds = append(kinds, string(e.Kind))
		if e.Seq != first+uint64(i) {
			t.Errorf("event %d has seq %d, want %d (gapless)", i, e.Seq, first+uint64(i))
		}
	}
	if len(evs) != 3 || evs[1].Kind != messages.KindEventsDropped || !strings.Contains(evs[1].Message, "1 event was not recorded") || evs[2].Seq != last {
		t.Errorf("events after the failure: %v (%+v), want the first, a notice that 1 event was lost, and the last", kinds, evs)
	}
}
