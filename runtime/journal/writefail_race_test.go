package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engenho/engenho/messages"
)

// REL-5: resync drops a prefix, which blocks badger's writes while it
// runs. A commit of the event log (which does not hold intentMu) in
// flight at that moment must not be failed for good by it: the event log
// goes on after the disk comes back. unsynced is set by hand, as another
// writer's commit the disk failed leaves it, while the disk writes again.
func TestAResyncBesideEventCommitsLeavesTheEventLogWorking(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), func(o *Options) { o.small = true; o.NoSync = true })
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		evs := make([]messages.Event, 50)
		for i := range evs {
			evs[i] = messages.Event{Kind: messages.KindDaemonState, Actor: "test", Message: "m"}
		}
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := j.Append(evs...); err != nil {
				done <- err
				return
			}
		}
	}()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		j.unsynced.Store(true)
		err = j.StopService("shop", fmt.Sprintf("s%d", i))
	}
	close(stop)
	if aerr := <-done; aerr != nil {
		t.Errorf("Append beside a resync: %v", aerr)
	}
	if err != nil {
		t.Errorf("StopService after a resync: %v", err)
	}
}

// REL-5: resync's flush can fail halfway (the disk fails again between
// the probe and the table file). badger's DropPrefix then leaves its
// memory table listed both as the current and as an immutable one, and a
// second DropPrefix flushes it twice and frees it while still listed (a
// nil dereference in the writer's goroutine). So the journal refuses
// writes until the daemon restarts, says so, still reads, closes, and
// the restart finds what was acknowledged.
func TestAResyncWhoseFlushFailsWaitsForARestart(t *testing.T) {
	dir := t.TempDir()
	j, _ := openTest(t, dir, func(o *Options) { o.small = true })
	if err := j.StopService("shop", "before"); err != nil {
		t.Fatal(err)
	}
	// The next table file's name is taken: creating it fails (EEXIST).
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	next := filepath.Join(dir, fmt.Sprintf("%06d.sst", len(tables)+1))
	if err := os.Mkdir(next, 0o700); err != nil {
		t.Fatal(err)
	}
	j.unsynced.Store(true)
	if err := j.StopService("shop", "refused"); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("stop while the flush fails: %v, want ErrWriteFailed", err)
	}
	if err := os.Remove(next); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("a write after a failed flush panicked: %v", p)
			}
		}()
		err := j.StopService("shop", "after")
		var we *WriteError
		if !errors.As(err, &we) || !we.Restart || !strings.Contains(err.Error(), "until the daemon restarts") {
			t.Errorf("stop after a failed flush: %v, want a *WriteError asking for a restart", err)
		}
		if !stopped(t, j, "before") || stopped(t, j, "after") {
			t.Error("reads after a failed flush do not show what was acknowledged")
		}
		if err := j.Close(); err != nil {
			t.Errorf("close after a failed flush: %v", err)
		}
	}()
	j, _ = openTest(t, dir, nil)
	if !stopped(t, j, "before") || stopped(t, j, "refused") {
		t.Error("after a restart, the acknowledged stop is lost or the refused one in force")
	}
	if err := j.StopService("shop", "restarted"); err != nil {
		t.Errorf("a write after the restart: %v", err)
	}
}
