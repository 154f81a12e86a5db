package journal

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/drivertest/faultfs"
	"github.com/engenho/engenho/messages"
)

// REL-5: a retention pass the disk fails is undone whole. The undo puts
// the deleted events back in one transaction, which holds far more bytes
// than the deletes: badger refused it (ErrTxnTooBig) and every refused
// delete stayed in force. deleteKeys now ends a transaction once the
// values it deletes fill txnBytes, so its undo fits.
func TestARetentionPassTheDiskFailsIsUndoneWhole(t *testing.T) {
	dir := t.TempDir()
	f := faultfs.StartT(t, t.TempDir(), dir)
	j, _ := openTest(t, filepath.Join(dir, "journal"), func(o *Options) {
		o.Retention = Retention{MaxEvents: 10, Interval: -1}
		o.GCInterval = -1
	})
	ev := messages.Event{Kind: messages.KindDaemonState, Actor: "test", Message: strings.Repeat("m", 1000)}
	for range 8_000 {
		if err := j.Emit(ev); err != nil {
			t.Fatal(err)
		}
	}
	last, err := j.Append(ev)
	if err != nil {
		t.Fatal(err)
	}
	first, err := j.FirstSeq()
	if err != nil {
		t.Fatal(err)
	}
	failWrites(t, f, true)
	if _, err := j.PruneEvents(); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("a retention pass while the disk fails: %v, want ErrWriteFailed", err)
	}
	failWrites(t, f, false)
	if got, err := j.FirstSeq(); err != nil || got != first {
		t.Errorf("after a refused retention pass the first event is %d (%v), want %d: the pass is in force", got, err, first)
	}
	evs, err := j.EventsAfter(last-1, 0)
	if err != nil || len(evs) != 1 {
		t.Errorf("the last event after a refused retention pass: %v (%v)", evs, err)
	}
}
