package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/engenho/engenho/drivers/clock"
)

// ErrNotLocked is returned by changes made without holding the lock.
var ErrNotLocked = errors.New("data directory lock not held")

// Dir is an opened data directory.
type Dir struct {
	root  string
	clock clock.Clock
	// lock is the open lock file while this Dir holds the lock.
	lock *os.File
	// startedAt is when this process took the lock: the run's start.
	startedAt time.Time
}

// Open opens the data directory at root, creating it (0700) and its control
// directory (always 0700: it holds the lock, the markers and the socket) if
// they are missing. It takes no lock.
func Open(root string, clk clock.Clock) (*Dir, error) {
	if root == "" {
		return nil, errors.New("datadir: empty data directory path")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("datadir %s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("datadir %s: %w", abs, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("datadir %s: %w", abs, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("datadir %s: not a directory", abs)
	}
	d := &Dir{root: abs, clock: clk}
	if err := os.MkdirAll(d.Control(), 0o700); err != nil {
		return nil, fmt.Errorf("datadir %s: %w", abs, err)
	}
	// MkdirAll keeps an existing directory's mode; the control directory
	// must not be readable by others whatever made it.
	if err := os.Chmod(d.Control(), 0o700); err != nil {
		return nil, fmt.Errorf("datadir %s: %w", abs, err)
	}
	return d, nil
}

// Root is the data directory itself (absolute).
func (d *Dir) Root() string { return d.root }

// Control is DATA/control.
func (d *Dir) Control() string { return filepath.Join(d.root, "control") }

// LockPath is DATA/control/lock.
func (d *Dir) LockPath() string { return filepath.Join(d.Control(), "lock") }

// RunMarkerPath is DATA/control/run.json.
func (d *Dir) RunMarkerPath() string { return filepath.Join(d.Control(), runMarkerName) }

// HoldPath is DATA/control/hold.
func (d *Dir) HoldPath() string { return filepath.Join(d.Control(), holdName) }

// Socket is DATA/control/engenho.sock. A unix socket path is limited to
// 107 bytes; the control socket package reports a longer one.
func (d *Dir) Socket() string { return filepath.Join(d.Control(), "engenho.sock") }

// Journal is DATA/journal.
func (d *Dir) Journal() string { return filepath.Join(d.root, "journal") }

// Instances is DATA/instances.
func (d *Dir) Instances() string { return filepath.Join(d.root, "instances") }

// Logs is DATA/logs.
func (d *Dir) Logs() string { return filepath.Join(d.root, "logs") }

// Hosts is DATA/hosts.
func (d *Dir) Hosts() string { return filepath.Join(d.root, "hosts") }

// NodeKeyPath is DATA/node.key, the node key that seals secret env
// values at rest (runtime/nodekey, SEC-2).
func (d *Dir) NodeKeyPath() string { return filepath.Join(d.root, "node.key") }

// Attic is DATA/attic.
func (d *Dir) Attic() string { return filepath.Join(d.root, "attic") }

func (d *Dir) requireLock() error {
	if d.lock == nil {
		return fmt.Errorf("datadir %s: %w", d.root, ErrNotLocked)
	}
	return nil
}
