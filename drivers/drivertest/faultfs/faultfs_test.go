package faultfs

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	ServeIfChild()
	os.Exit(m.Run())
}

// mount mounts a fault file system over a fresh backing directory, served
// by a child process.
func mount(t *testing.T) *Child { return StartT(t, t.TempDir(), t.TempDir()) }

// fail switches the failure and returns the count of refused operations.
func fail(t *testing.T, f *Child, on bool) int64 {
	t.Helper()
	n, err := f.FailWrites(on)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func wantEIO(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("%s while writes fail: %v, want EIO", what, err)
	}
}

// CHS disk.eio: while writes fail, every call that would change the disk
// gets EIO from the kernel and reads go on; switched back, writes work
// and what was written before is intact.
func TestWritesFailWithEIOAndReadsGoOn(t *testing.T) {
	f := mount(t)
	path := filepath.Join(f.Dir(), "state.json")
	if err := os.WriteFile(path, []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	open, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	fail(t, f, true)
	_, err = open.WriteAt([]byte("during"), 0)
	wantEIO(t, "write", err)
	wantEIO(t, "fsync", open.Sync())
	wantEIO(t, "create", os.WriteFile(filepath.Join(f.Dir(), "new"), []byte("x"), 0o600))
	wantEIO(t, "mkdir", os.Mkdir(filepath.Join(f.Dir(), "d"), 0o700))
	wantEIO(t, "rename", os.Rename(path, path+".moved"))
	wantEIO(t, "unlink", os.Remove(path))
	wantEIO(t, "truncate", os.Truncate(path, 1))
	if b, err := os.ReadFile(path); err != nil || string(b) != "before" {
		t.Errorf("read while writes fail: %q, %v; want %q", b, err, "before")
	}
	if n := fail(t, f, false); n < 7 {
		t.Errorf("%d operations refused, want at least the 7 calls refused", n)
	}

	if _, err := open.WriteAt([]byte("after!"), 0); err != nil {
		t.Fatalf("write after the failure ends: %v", err)
	}
	if err := open.Sync(); err != nil {
		t.Fatalf("fsync after the failure ends: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(f.Backing(), "state.json"))
	if err != nil || string(b) != "after!" {
		t.Errorf("backing file: %q, %v; want %q", b, err, "after!")
	}
}

// badger writes its write-ahead log through a shared mapping and syncs it
// with msync: that sync must see the failure too.
func TestMsyncOfAMappedWriteFailsWithEIO(t *testing.T) {
	f := mount(t)
	open, err := os.OpenFile(filepath.Join(f.Dir(), "000001.mem"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := open.Truncate(1 << 16); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(open.Fd()), 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	copy(m, "entry one")
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatalf("msync before the failure: %v", err)
	}
	fail(t, f, true)
	copy(m[4096:], "entry two")
	wantEIO(t, "msync", unix.Msync(m, unix.MS_SYNC))
	fail(t, f, false)
}

// The daemon's control socket lives in its data directory: a socket bound
// on the mount must take connections.
func TestAUnixSocketOnTheMountTakesConnections(t *testing.T) {
	f := mount(t)
	l, err := net.Listen("unix", filepath.Join(f.Dir(), "engenho.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			_ = c.Close()
		}
	}()
	c, err := net.Dial("unix", filepath.Join(f.Dir(), "engenho.sock"))
	if err != nil {
		t.Fatalf("connecting to a socket on the mount: %v", err)
	}
	_ = c.Close()
}

// What the journal's resync exists for: a page of a mapped file whose
// writeback failed is not written again once the disk writes (the kernel
// marked it clean), so the file keeps a hole where the failure was while
// the pages written after it reach the disk.
func TestAPageMsyncedDuringTheFailureNeverReachesTheDisk(t *testing.T) {
	f := mount(t)
	const page = 4096
	open, err := os.OpenFile(filepath.Join(f.Dir(), "wal"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := open.Truncate(3 * page); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(open.Fd()), 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	copy(m, "before")
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	fail(t, f, true)
	copy(m[page:], "during")
	wantEIO(t, "msync", unix.Msync(m, unix.MS_SYNC))
	fail(t, f, false)
	copy(m[2*page:], "after")
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(f.Backing(), "wal"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:6]) != "before" || string(b[2*page:2*page+5]) != "after" {
		t.Errorf("on disk: %q ... %q, want the pages synced before and after the failure", b[:6], b[2*page:2*page+5])
	}
	if string(b[page:page+6]) != "\x00\x00\x00\x00\x00\x00" {
		t.Errorf("on disk the page synced during the failure reads %q: the kernel wrote it after all (then the journal's resync is not needed here)", b[page:page+6])
	}
}
