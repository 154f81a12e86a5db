package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MoveAside renames the journal directory dir to dest (`reinit journal`,
// DMN-14: moved aside, never deleted). It takes badger's directory lock
// first and holds it through the rename, so it fails with a *LockedError
// while any process has the journal open, and nothing can open it midway.
// dest must not exist; its parent is created (0700).
func MoveAside(dir, dest string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal %s: move aside: %w", dir, err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return &LockedError{Dir: dir, PID: lockPID(dir)}
	}
	if err != nil {
		return fmt.Errorf("journal %s: lock: %w", dir, err)
	}
	defer func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }()
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("journal %s: move aside: %s already exists: %w", dir, dest, os.ErrExist)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return fmt.Errorf("journal %s: move aside: %w", dir, err)
	}
	if err := os.Rename(dir, dest); err != nil {
		return fmt.Errorf("journal %s: move aside: %w", dir, err)
	}
	return nil
}
