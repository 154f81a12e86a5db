package datadir

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockedError says another process holds the data directory (DMN-2).
type LockedError struct {
	Dir  string
	Path string
	// Pid is the holder's pid as it wrote it; 0 if it could not be read
	// (the holder may be between taking the lock and writing its pid).
	Pid int
}

func (e *LockedError) Error() string {
	if e.Pid == 0 {
		return fmt.Sprintf("data directory %s is in use by another process (lock %s)", e.Dir, e.Path)
	}
	return fmt.Sprintf("data directory %s is in use by pid %d (lock %s)", e.Dir, e.Pid, e.Path)
}

// Lock takes the exclusive lock on DATA/control/lock without waiting and
// writes this process's pid into it. If another process holds it, Lock
// fails at once with a *LockedError naming that process's pid. The lock
// lasts until Unlock or the end of the process; the file descriptor is
// close-on-exec, so workloads started by the daemon never inherit it.
func (d *Dir) Lock() error {
	if d.lock != nil {
		return fmt.Errorf("datadir %s: already locked by this process", d.root)
	}
	f, err := os.OpenFile(d.LockPath(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("datadir %s: %w", d.root, err)
	}
	if err := flockNoWait(f); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return &LockedError{Dir: d.root, Path: d.LockPath(), Pid: readPid(d.LockPath())}
		}
		return fmt.Errorf("datadir %s: lock %s: %w", d.root, d.LockPath(), err)
	}
	if err := writePid(f); err != nil {
		f.Close() // closing releases the flock
		return fmt.Errorf("datadir %s: lock %s: %w", d.root, d.LockPath(), err)
	}
	d.lock = f
	d.startedAt = d.clock.Now()
	d.removeStaleTemps()
	return nil
}

// Unlock releases the lock (emptying the pid first).
func (d *Dir) Unlock() error {
	if d.lock == nil {
		return nil
	}
	f := d.lock
	d.lock = nil
	truncErr := f.Truncate(0)
	unlockErr := unix.Flock(int(f.Fd()), unix.LOCK_UN)
	closeErr := f.Close()
	if err := errors.Join(truncErr, unlockErr, closeErr); err != nil {
		return fmt.Errorf("datadir %s: unlock: %w", d.root, err)
	}
	return nil
}

// Locked reports whether this Dir holds the lock.
func (d *Dir) Locked() bool { return d.lock != nil }

func flockNoWait(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			return err
		}
	}
}

func writePid(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return err
	}
	return f.Sync()
}

// readPid reads the holder's pid from the lock file; 0 if unreadable.
func readPid(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
