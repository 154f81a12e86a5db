package drivertest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// tryLock reports whether another open file could take the incus test lock
// now, as a test in another package would.
func tryLock(t *testing.T) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "engenho-incus-tests.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// The lock keeps others out while any test of this process holds it, is
// shared (not deadlocked) by a second hold in the same process, and is
// dropped when the last holder ends.
func TestLockIncus(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Run("held", func(t *testing.T) {
		LockIncus(t)
		LockIncus(t) // a helper asking again in the same test
		if tryLock(t) {
			t.Fatal("another package could take the lock while a test holds it")
		}
	})
	if !tryLock(t) {
		t.Fatal("the lock is still held after its tests ended")
	}
}
