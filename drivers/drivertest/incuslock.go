package drivertest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// incusLock is this process's hold on the machine-wide incus test lock:
// the first test to ask takes the flock, later ones in the same process
// share it, the last to end releases it.
var incusLock struct {
	sync.Mutex
	holders int
	file    *os.File
}

// LockIncus keeps the tests of other packages off the local incusd while
// t runs. `go test ./...` runs packages side by side, and one package's
// containers beside another's load incusd until it stretches its stop
// hooks and operations past what the tests allow (seen in CI). Tests of
// the same package still share incusd as they always did. The lock is an
// flock on a file in the temporary directory, dropped when t ends; a
// process that dies drops it with its descriptors.
func LockIncus(t testing.TB) {
	t.Helper()
	incusLock.Lock()
	defer incusLock.Unlock()
	if incusLock.holders == 0 {
		path := filepath.Join(os.TempDir(), "engenho-incus-tests.lock")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatalf("incus test lock %s: %v", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			_ = f.Close()
			t.Fatalf("incus test lock %s: %v", path, err)
		}
		incusLock.file = f
	}
	incusLock.holders++
	t.Cleanup(unlockIncus)
}

func unlockIncus() {
	incusLock.Lock()
	defer incusLock.Unlock()
	incusLock.holders--
	if incusLock.holders == 0 {
		_ = incusLock.file.Close() // closing the descriptor drops the flock
		incusLock.file = nil
	}
}
