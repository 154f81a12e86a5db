package datadir

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/clock"
)

// TestSecondDaemonFailsNamingHolder: a second process locking the same data
// directory fails at once with the holder's pid; once the holder is gone
// the lock can be taken (DMN-2).
func TestSecondDaemonFailsNamingHolder(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, dir)

	d, err := Open(dir, clock.New())
	if err != nil {
		t.Fatal(err)
	}
	err = d.Lock()
	var locked *LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("second locker: got %v, want *LockedError", err)
	}
	if locked.Pid != h.cmd.Process.Pid {
		t.Fatalf("error names pid %d, holder is %d", locked.Pid, h.cmd.Process.Pid)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(h.cmd.Process.Pid)) {
		t.Fatalf("message does not name the holder: %v", err)
	}
	if d.Locked() {
		t.Fatal("failed Lock left the Dir locked")
	}

	h.release(t)
	if err := d.Lock(); err != nil {
		t.Fatalf("after the holder exited: %v", err)
	}
	data, _ := os.ReadFile(d.LockPath())
	if strings.TrimSpace(string(data)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q, want our pid", data)
	}
	if err := d.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestLockIsPerOpenFile: two Dirs in one process also exclude each other
// (flock is per open file), and Unlock lets the other in (DMN-2).
func TestLockIsPerOpenFile(t *testing.T) {
	a, _ := openLocked(t)
	b, err := Open(a.Root(), clock.New())
	if err != nil {
		t.Fatal(err)
	}
	var locked *LockedError
	if err := b.Lock(); !errors.As(err, &locked) || locked.Pid != os.Getpid() {
		t.Fatalf("got %v", err)
	}
	if err := a.Lock(); err == nil {
		t.Fatal("locking twice through one Dir succeeded")
	}
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(); err != nil {
		t.Fatalf("after Unlock: %v", err)
	}
	b.Unlock()
}

func TestLockedErrorWithoutPid(t *testing.T) {
	e := &LockedError{Dir: "/d", Path: "/d/control/lock"}
	if got := e.Error(); got != "data directory /d is in use by another process (lock /d/control/lock)" {
		t.Fatal(got)
	}
}

// TestChangesNeedTheLock: markers and attic moves are refused without the
// lock; reads work.
func TestChangesNeedTheLock(t *testing.T) {
	d, _ := openTemp(t)
	for name, err := range map[string]error{
		"MarkLive":     d.MarkLive("adopt"),
		"MarkReleased": d.MarkReleased(),
		"SetHold":      d.SetHold(),
		"ClearHold":    d.ClearHold(),
	} {
		if !errors.Is(err, ErrNotLocked) {
			t.Errorf("%s without the lock: %v", name, err)
		}
	}
	if _, err := d.MoveToAttic("journal"); !errors.Is(err, ErrNotLocked) {
		t.Errorf("MoveToAttic without the lock: %v", err)
	}
	if _, err := d.PreviousRun(); !errors.Is(err, ErrNotLocked) {
		t.Errorf("PreviousRun without the lock: %v", err)
	}
	if _, err := d.HoldPresent(); err != nil {
		t.Errorf("HoldPresent: %v", err)
	}
	if _, _, err := d.ReadRunMarker(); err != nil {
		t.Errorf("ReadRunMarker: %v", err)
	}
}
