package faultfs

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is one mounted fault file system.
type FS struct {
	dir     string
	backing string
	server  *fuse.Server
	failing atomic.Bool
	refused atomic.Int64
}

// ErrUnavailable: FUSE cannot be mounted here (no /dev/fuse, not root).
var ErrUnavailable = errors.New("faultfs: FUSE is not available")

// Mount mounts a loopback of backing on dir (both existing directories)
// and serves it until Unmount.
func Mount(backing, dir string) (*FS, error) {
	f := &FS{dir: dir, backing: backing}
	inner, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("faultfs: %s: %w", backing, err)
	}
	lb := inner.(*fs.LoopbackNode)
	root := &node{LoopbackNode: lb, fs: f}
	lb.RootData.RootNode = root
	// Short caches: the campaign also reads the files while the daemon
	// writes them, and a stale size would show it a torn file.
	timeout := 100 * time.Millisecond
	opts := &fs.Options{EntryTimeout: &timeout, AttrTimeout: &timeout, NegativeTimeout: &timeout,
		MountOptions: fuse.MountOptions{FsName: "engenho-faultfs", Name: "faultfs", DirectMount: true, MaxWrite: 1 << 20,
			// A local disk keeps its page cache when a file changes; FUSE drops
			// it at each attribute change unless told not to.
			ExplicitDataCacheControl: true}}
	server, err := fs.Mount(dir, root, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: mounting %s on %s: %v", ErrUnavailable, backing, dir, err)
	}
	f.server = server
	return f, nil
}

// Dir is where the file system is mounted.
func (f *FS) Dir() string { return f.dir }

// Backing is the directory it passes through to.
func (f *FS) Backing() string { return f.backing }

// FailWrites switches the failure on or off.
func (f *FS) FailWrites(on bool) { f.failing.Store(on) }

// Refused is how many operations failed with EIO so far.
func (f *FS) Refused() int64 { return f.refused.Load() }

// Unmount unmounts it (lazily when something still holds it open) and
// stops serving.
func (f *FS) Unmount() error {
	f.failing.Store(false)
	if err := f.server.Unmount(); err != nil {
		if err := syscall.Unmount(f.dir, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("faultfs: unmounting %s: %w", f.dir, err)
		}
	}
	return nil
}

// refuse says whether the operation must fail, and counts it.
func (f *FS) refuse() bool {
	if !f.failing.Load() {
		return false
	}
	f.refused.Add(1)
	return true
}
