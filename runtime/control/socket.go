package control

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// maxSocketPath is the longest unix socket path Linux takes (sun_path is
// 108 bytes with its NUL).
const maxSocketPath = 107

// Socket file modes (DMN-11, SEC-1).
const (
	modeOwner = 0o600 // no group configured
	modeGroup = 0o660 // a group is configured
)

// socketFile is the listening socket and the file it is bound to.
type socketFile struct {
	path string
	ino  uint64
}

// listen creates the socket at path with its final mode before anyone can
// reach it: it binds a temporary name in the same directory, sets the mode
// (and group), then renames it into place. A stale socket at path is
// replaced; a live one (a daemon answers on it) or any other file is an
// error.
func listen(path string, gid uint32, hasGroup bool) (*net.UnixListener, socketFile, error) {
	if len(path) > maxSocketPath {
		return nil, socketFile{}, fmt.Errorf("control socket %s: path is %d bytes, unix sockets allow %d", path, len(path), maxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := checkDir(dir, gid, hasGroup); err != nil {
		return nil, socketFile{}, err
	}
	if err := clearStale(path); err != nil {
		return nil, socketFile{}, err
	}
	tmp := filepath.Join(dir, ".c"+strconv.Itoa(os.Getpid())+".tmp")
	if len(tmp) > maxSocketPath {
		return nil, socketFile{}, fmt.Errorf("control socket %s: directory path too long for a unix socket", path)
	}
	_ = os.Remove(tmp) // a leftover of an earlier run with the same pid
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, socketFile{}, fmt.Errorf("control socket %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, socketFile, error) {
		l.Close()
		os.Remove(tmp)
		return nil, socketFile{}, fmt.Errorf("control socket %s: %w", path, err)
	}
	mode := os.FileMode(modeOwner)
	if hasGroup {
		mode = modeGroup
		if err := os.Chown(tmp, -1, int(gid)); err != nil {
			return fail(err)
		}
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	return l, socketFile{path: path, ino: inode(fi)}, nil
}

// checkDir refuses a socket directory that others could write to (they
// could replace the socket) and, with a group, lets the group reach the
// socket: the directory gets the group and mode u=(as is),g=x,o=.
func checkDir(dir string, gid uint32, hasGroup bool) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("control socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("control socket directory %s: not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && st.Uid != 0 && st.Uid != uint32(os.Getuid()) {
		return fmt.Errorf("control socket directory %s: owned by uid %d, want root or the daemon's uid %d", dir, st.Uid, os.Getuid())
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return fmt.Errorf("control socket directory %s: mode %04o is writable by group or others, who could replace the socket", dir, perm)
	}
	if !hasGroup {
		return nil
	}
	if err := os.Chown(dir, -1, int(gid)); err != nil {
		return fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	want := perm&0o700 | 0o010
	if err := os.Chmod(dir, want); err != nil {
		return fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	return nil
}

// clearStale removes a socket at path nobody answers on.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("control socket %s: exists and is not a socket (%s)", path, fi.Mode().Type())
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: another daemon is listening on it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("control socket %s: removing the stale socket: %w", path, err)
	}
	return nil
}

// remove deletes the socket file if it is still the one this server made.
func (s socketFile) remove() {
	fi, err := os.Lstat(s.path)
	if err == nil && inode(fi) == s.ino {
		os.Remove(s.path)
	}
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
