package checkpoint_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/drivers/objstore/fake"
	fsstore "github.com/engenho/engenho/drivers/objstore/fs"
	"github.com/engenho/engenho/drivers/objstore/s3/s3test"
)

var (
	ctx   = context.Background()
	start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

type backend struct {
	name string
	open func(t *testing.T, clk clock.Clock) objstore.Store
}

func backends() []backend {
	return []backend{
		{"fake", func(t *testing.T, clk clock.Clock) objstore.Store { return fake.New(fake.Options{Clock: clk}) }},
		{"fs", func(t *testing.T, clk clock.Clock) objstore.Store {
			s, err := fsstore.Open(t.TempDir(), fsstore.Options{Clock: clk, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"s3-gofakes3", func(t *testing.T, clk clock.Clock) objstore.Store { return s3test.Fake(t, nil) }},
		{"s3-minio", func(t *testing.T, clk clock.Clock) objstore.Store { return s3test.Real(t, nil) }},
	}
}

func newCheckpointer(t *testing.T, store objstore.Store, clk clock.Clock, tune func(*checkpoint.Config)) *checkpoint.Checkpointer {
	t.Helper()
	cfg := checkpoint.Config{Store: store, Prefix: "engenho", Clock: clk, NoSync: true}
	if tune != nil {
		tune(&cfg)
	}
	c, err := checkpoint.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tarFormat(c *checkpoint.Config) { c.Format = checkpoint.Tar }

var writerA = checkpoint.Writer{Holder: "node-a/1", Node: "node-a", Epoch: 1}
var writerB = checkpoint.Writer{Holder: "node-b/1", Node: "node-b", Epoch: 2}

func claim(t *testing.T, c *checkpoint.Checkpointer, w checkpoint.Writer) checkpoint.Head {
	t.Helper()
	head, err := c.Claim(ctx, "app.example.com", w)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return head
}

func save(t *testing.T, c *checkpoint.Checkpointer, head checkpoint.Head, dir string) checkpoint.Head {
	t.Helper()
	next, _, err := c.Save(ctx, head, dir)
	if err != nil {
		t.Fatalf("save: %v", err)
	}
	return next
}

// richTree makes a data directory with every kind of entry a checkpoint
// keeps: files of several modes and sizes, empty and nested and read-only
// directories, a sticky directory, relative, absolute and dangling
// symlinks, and set modification times.
func richTree(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "db/wal"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "empty/deeper/still"), 0o750))
	must(os.WriteFile(filepath.Join(dir, "db/main.sqlite"), bytesOf(300_000, 1), 0o600))
	must(os.WriteFile(filepath.Join(dir, "db/wal/0001"), bytesOf(1234, 2), 0o640))
	must(os.WriteFile(filepath.Join(dir, "zero"), nil, 0o644))
	must(os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "readonly"), []byte("ro"), 0o400))
	must(os.Mkdir(filepath.Join(dir, "sticky"), 0o777))
	must(os.Chmod(filepath.Join(dir, "sticky"), 0o777|os.ModeSticky))
	must(os.Mkdir(filepath.Join(dir, "locked"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "locked/inside"), []byte("x"), 0o644))
	must(os.Symlink("db/main.sqlite", filepath.Join(dir, "current")))
	must(os.Symlink("/etc/hostname", filepath.Join(dir, "absolute")))
	must(os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	old := time.Date(2020, 5, 6, 7, 8, 9, 123456789, time.UTC)
	for _, p := range []string{"db/main.sqlite", "zero", "run.sh", "locked/inside", "db/wal"} {
		must(os.Chtimes(filepath.Join(dir, p), old, old))
	}
	must(os.Chmod(filepath.Join(dir, "locked"), 0o555))
	must(os.Chtimes(filepath.Join(dir, "locked"), old, old))
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "locked"), 0o755) })
}

func bytesOf(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

// snapshot describes a tree: per entry its type, mode, size, content hash,
// link target and (for files and directories) modification time.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %s", rel, info.Mode())
		switch {
		case info.Mode().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			line += fmt.Sprintf(" %d %s %s", len(data), hex.EncodeToString(sum[:8]), info.ModTime().UTC().Format(time.RFC3339Nano))
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(path)
			line += " -> " + target
		case info.IsDir() && rel != ".":
			line += " " + info.ModTime().UTC().Format(time.RFC3339Nano)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// restoreInto restores head into dst and fails the test unless the tree
// there equals want's.
func restoreInto(t *testing.T, c *checkpoint.Checkpointer, head checkpoint.Head, dst, want string) {
	t.Helper()
	if _, err := c.Restore(ctx, head, dst); err != nil {
		t.Fatalf("restore into %s: %v", dst, err)
	}
	if snapshot(t, dst) != snapshot(t, want) {
		t.Fatalf("the tree restored into %s differs from %s", dst, want)
	}
}

// cutStore fails the next put of an archive after n body bytes: a
// connection or process dying in the middle of an upload.
type cutStore struct {
	objstore.Store
	after int64
	armed bool
}

func (s *cutStore) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if s.armed && strings.Contains(key, "/ckpt/") {
		s.armed = false
		body = &cutReader{r: body, left: s.after}
	}
	return s.Store.Put(ctx, key, body, cond)
}

type cutReader struct {
	r    io.Reader
	left int64
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("connection reset in the middle of the upload")
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// corrupt flips one byte in the middle of an object, through the store.
func corrupt(t *testing.T, store objstore.Store, key string) {
	t.Helper()
	obj, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	data[len(data)/2] ^= 0xff
	if _, err := store.Put(ctx, key, strings.NewReader(string(data)), objstore.Always); err != nil {
		t.Fatal(err)
	}
}

func listen(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

func bytesReader(b []byte) io.Reader { return strings.NewReader(string(b)) }
