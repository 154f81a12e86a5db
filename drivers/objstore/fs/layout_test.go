package fs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/fs"
)

// DRV-9: ETags are content hashes (sha256), so equal bodies have equal
// ETags, and the file holds header + body.
func TestETagIsContentHash(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	e1, _ := s.Put(ctx, "a", strings.NewReader("same"), objstore.Always)
	e2, _ := s.Put(ctx, "b", strings.NewReader("same"), objstore.Always)
	// sha256("same")
	if e1 != e2 || e1 != "0967115f2813a3541eaef77de9d9d5773f1c0c04314b0bbfe4ff3b3b1c55b5d5" {
		t.Fatalf("ETags %q %q", e1, e2)
	}
	path, _ := s.Path("a")
	data, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(data), "\nsame") || !strings.HasPrefix(string(data), "EOBJ1 "+e1) {
		t.Fatalf("object file %q", data)
	}
}

// A damaged object file is reported, not served, and conditional writes
// over it refuse rather than guess.
func TestCorruptHeader(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	etag, _ := s.Put(ctx, "k", strings.NewReader("v"), objstore.Always)
	path, _ := s.Path("k")
	os.WriteFile(path, []byte("garbage"), 0o600)
	if _, err := s.Get(ctx, "k"); !errors.Is(err, objstore.ErrInvalid) {
		t.Fatalf("get of a corrupt file: %v", err)
	}
	if _, err := s.Put(ctx, "k", strings.NewReader("w"), objstore.IfMatch(etag)); !errors.Is(err, objstore.ErrInvalid) {
		t.Fatalf("conditional put over a corrupt file: %v", err)
	}
	if _, err := s.Put(ctx, "k", strings.NewReader("w"), objstore.Always); err != nil {
		t.Fatalf("plain put over a corrupt file: %v", err)
	}
}

// A crashed writer's temp files are swept at Open once a day old; fresh
// ones (maybe another process's upload in flight) are kept.
func TestStaleTempSwept(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	s.Close()
	now := time.Now()
	old, fresh := filepath.Join(dir, "tmp", "put-old"), filepath.Join(dir, "tmp", "put-fresh")
	os.WriteFile(old, []byte("x"), 0o600)
	os.WriteFile(fresh, []byte("x"), 0o600)
	os.Chtimes(old, now.Add(-25*time.Hour), now.Add(-25*time.Hour))
	s2, err := fs.Open(dir, fs.Options{Clock: clock.NewFake(now)})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatal("stale temp kept")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatal("fresh temp swept")
	}
}

// Open refuses a directory some other program laid out.
func TestForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("something else\n"), 0o600)
	if _, err := fs.Open(dir, fs.Options{}); !errors.Is(err, objstore.ErrInvalid) {
		t.Fatalf("open of a foreign dir: %v", err)
	}
}

// Deleting the last object under a prefix leaves no empty directories.
func TestDeletePrunesDirectories(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := context.Background()
	s.Put(ctx, "a/b/c/d", strings.NewReader("x"), objstore.Always)
	s.Put(ctx, "a/keep", strings.NewReader("x"), objstore.Always)
	s.Delete(ctx, "a/b/c/d", objstore.Always)
	if _, err := os.Stat(filepath.Join(dir, "objects", "a", "b")); !os.IsNotExist(err) {
		t.Fatal("empty directories left")
	}
	if _, err := os.Stat(filepath.Join(dir, "objects", "a")); err != nil {
		t.Fatal("non-empty directory removed")
	}
}
