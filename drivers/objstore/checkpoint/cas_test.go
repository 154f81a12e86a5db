package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/drivers/objstore/fake"
)

const host = "app.example.com"

func blobKeys(store *fake.Store) []string {
	var out []string
	for _, k := range store.Keys() {
		if strings.Contains(k, "/blobs/") {
			out = append(out, k)
		}
	}
	return out
}

// manyFiles writes n files of size bytes each under dir/files.
func manyFiles(t testing.TB, dir string, n, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, "files", fmt.Sprintf("f%03d", i)), bytesOf(size, byte(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ACT-15: after a first full save, changing one file uploads that file's
// blob and the index only, on every store; the restore is the new tree.
func TestACT15OneFileChangeUploadsOneBlob(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			c := newCheckpointer(t, be.open(t, clk), clk, nil)
			dir := filepath.Join(t.TempDir(), "data")
			manyFiles(t, dir, 16, 64<<10)
			os.WriteFile(filepath.Join(dir, "small"), bytesOf(4096, 99), 0o600)
			head, st, err := c.Save(ctx, claim(t, c, writerA), dir)
			if err != nil {
				t.Fatal(err)
			}
			if st.Blobs != 17 || st.Bytes < 16*64<<10 {
				t.Fatalf("first save %+v", st)
			}
			os.WriteFile(filepath.Join(dir, "small"), bytesOf(4096, 100), 0o600)
			head, st, err = c.Save(ctx, head, dir)
			if err != nil {
				t.Fatal(err)
			}
			if st.Blobs != 1 || st.Reused != 16 || st.Bytes < 4096 || st.Bytes > 4096+8192 {
				t.Fatalf("1-file change uploaded %d bytes in %d blobs (%d reused), want about 4 KiB in 1", st.Bytes, st.Blobs, st.Reused)
			}
			dst := filepath.Join(t.TempDir(), "restored")
			if _, err := c.Restore(ctx, head, dst); err != nil {
				t.Fatal(err)
			}
			if got, want := snapshot(t, dst), snapshot(t, dir); got != want {
				t.Fatalf("restored tree differs\n--- got\n%s\n--- want\n%s", got, want)
			}
		})
	}
}

// ACT-15, ACT-9: a blob upload that dies midway fails the save, leaves
// the previous checkpoint current and restorable, and the next save on
// the same head lands.
func TestACT15InterruptedBlobUpload(t *testing.T) {
	clk := clock.NewFake(start)
	inner := fake.New(fake.Options{Clock: clk})
	store := &cutBlobStore{Store: inner, after: 10_000}
	c := newCheckpointer(t, store, clk, nil)
	dir := filepath.Join(t.TempDir(), "data")
	richTree(t, dir)
	want := snapshot(t, dir)
	head := save(t, c, claim(t, c, writerA), dir)
	os.WriteFile(filepath.Join(dir, "db/main.sqlite"), bytesOf(400_000, 9), 0o600)
	store.armed = true
	if _, _, err := c.Save(ctx, head, dir); err == nil {
		t.Fatal("save with a cut blob upload succeeded")
	}
	loaded, err := c.Load(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.ETag != head.ETag || loaded.Manifest.Current.Key != head.Manifest.Current.Key {
		t.Fatal("manifest moved after a failed save")
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := c.Restore(ctx, loaded, dst); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, dst); got != want {
		t.Fatal("restored tree is not the previous checkpoint")
	}
	next := save(t, c, head, dir)
	if next.Manifest.Current.Key == head.Manifest.Current.Key {
		t.Fatal("the retry did not make a new checkpoint")
	}
}

// cutBlobStore fails the next blob put after n body bytes.
type cutBlobStore struct {
	objstore.Store
	after int64
	armed bool
}

func (s *cutBlobStore) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if s.armed && strings.Contains(key, "/blobs/") {
		s.armed = false
		body = &cutReader{r: body, left: s.after}
	}
	return s.Store.Put(ctx, key, body, cond)
}

// ACT-15, ACT-9: a blob that reads back wrong fails the save before the
// manifest switch, and the bad blob is not left for a later save to reuse.
func TestACT15SaveVerifiesBlobs(t *testing.T) {
	clk := clock.NewFake(start)
	inner := fake.New(fake.Options{Clock: clk})
	head := claim(t, newCheckpointer(t, inner, clk, nil), writerA)
	dir := filepath.Join(t.TempDir(), "data")
	richTree(t, dir)
	rotting := &rotBlobs{Store: inner}
	c := newCheckpointer(t, rotting, clk, nil)
	if _, _, err := c.Save(ctx, head, dir); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("save onto a rotting store: %v, want ErrCorrupt", err)
	}
	loaded, _ := c.Load(ctx, host)
	if loaded.ETag != head.ETag || loaded.Manifest.Current != nil {
		t.Fatal("manifest switched to an unverified checkpoint")
	}
	rotting.off = true
	next := save(t, c, head, dir)
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := c.Restore(ctx, next, dst); err != nil {
		t.Fatalf("restore after a clean save: %v", err)
	}
}

// rotBlobs corrupts every blob right after storing it.
type rotBlobs struct {
	*fake.Store
	off bool
}

func (r *rotBlobs) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	etag, err := r.Store.Put(ctx, key, body, cond)
	if err == nil && !r.off && strings.Contains(key, "/blobs/") {
		r.Store.Tamper(key, func(b []byte) []byte {
			if len(b) > 0 {
				b[0] ^= 1
			}
			return b
		})
	}
	return etag, err
}

// ACT-15: restore verifies every blob's hash: a corrupted or missing blob
// or pack (packs.go) is ErrCorrupt and the target directory keeps what it
// had.
func TestACT15RestoreVerifiesEveryBlob(t *testing.T) {
	for _, tc := range []struct{ damage, object string }{
		{"flip", "pack"}, {"delete", "pack"}, {"truncate", "pack"},
		{"flip", "blob"}, {"delete", "blob"}, {"truncate", "blob"},
	} {
		t.Run(tc.damage+" "+tc.object, func(t *testing.T) {
			damage := tc.damage
			clk := clock.NewFake(start)
			store := fake.New(fake.Options{Clock: clk})
			c := newCheckpointer(t, store, clk, nil)
			dir := filepath.Join(t.TempDir(), "data")
			manyFiles(t, dir, 4, 10_000)
			os.WriteFile(filepath.Join(dir, "big"), bytesOf(2<<20, 7), 0o600)
			head := save(t, c, claim(t, c, writerA), dir)
			dst := filepath.Join(t.TempDir(), "restored")
			os.MkdirAll(dst, 0o700)
			os.WriteFile(filepath.Join(dst, "mine"), []byte("local"), 0o600)
			before := snapshot(t, dst)
			keys := blobKeys(store)
			if len(keys) != 2 {
				t.Fatalf("4 small files and a big one stored as %v, want a pack and a blob", keys)
			}
			victim := keys[0]
			if strings.Contains(keys[0], "/blobs/p-") != (tc.object == "pack") {
				victim = keys[1]
			}
			switch damage {
			case "flip":
				corrupt(t, store, victim)
			case "delete":
				store.Delete(ctx, victim, objstore.Always)
			case "truncate":
				store.Tamper(victim, func(b []byte) []byte { return b[:len(b)-1] })
			}
			if _, err := c.Restore(ctx, head, dst); !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("restore with a damaged blob: %v, want ErrCorrupt", err)
			}
			if got := snapshot(t, dst); got != before {
				t.Fatal("a failed restore changed the target")
			}
			left, _ := filepath.Glob(dst + ".restore-*")
			if len(left) != 0 {
				t.Fatalf("temporaries left: %v", left)
			}
		})
	}
}

// ACT-15: blobs no kept checkpoint names are deleted: those of dropped
// checkpoints at once, orphans of a failed save once older than
// OrphanAge; blobs a kept checkpoint names stay.
func TestACT15BlobGarbageCollection(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	c := newCheckpointer(t, store, clk, func(c *checkpoint.Config) { c.Keep = 2; c.OrphanAge = time.Hour })
	dir := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "stable"), []byte("never changes"), 0o644)
	orphan := "engenho/" + host + "/blobs/" + strings.Repeat("0", 64)
	store.Put(ctx, orphan, strings.NewReader("left by a failed save"), objstore.Always)
	head := claim(t, c, writerA)
	for i := range 4 {
		clk.Advance(time.Minute)
		os.WriteFile(filepath.Join(dir, "changing"), fmt.Appendf(nil, "version %d", i), 0o644)
		head = save(t, c, head, dir)
	}
	// Kept: versions 2 and 3 and "stable"; the young orphan too.
	if got := blobKeys(store); len(got) != 4 || !has(got, orphan) {
		t.Fatalf("blobs after 4 saves with keep 2: %v", got)
	}
	clk.Advance(2 * time.Hour)
	os.WriteFile(filepath.Join(dir, "changing"), []byte("version 4"), 0o644)
	head = save(t, c, head, dir)
	got := blobKeys(store)
	if len(got) != 3 || has(got, orphan) {
		t.Fatalf("blobs after GC: %v (want stable, version 3, version 4)", got)
	}
	for _, e := range append([]checkpoint.Entry{*head.Manifest.Current}, head.Manifest.History...) {
		dst := filepath.Join(t.TempDir(), "r")
		if _, err := c.Restore(ctx, checkpoint.Head{Host: host, Manifest: checkpoint.Manifest{Current: &e}}, dst); err != nil {
			t.Fatalf("kept checkpoint %s no longer restores: %v", e.Key, err)
		}
	}
}

// ACT-15, ACT-6: a holder fenced out by another node's claim cannot
// switch the manifest, and the new holder's saves and restores work.
func TestACT15FencedHolderStopsShipping(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	a := newCheckpointer(t, store, clk, nil)
	b := newCheckpointer(t, store, clk, nil)
	dir := filepath.Join(t.TempDir(), "data")
	manyFiles(t, dir, 3, 1000)
	headA := save(t, a, claim(t, a, writerA), dir)
	headB := claim(t, b, writerB)
	os.WriteFile(filepath.Join(dir, "new"), []byte("after the takeover"), 0o644)
	if _, _, err := a.Save(ctx, headA, dir); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("stale holder save: %v, want ErrFenced", err)
	}
	loaded, _ := b.Load(ctx, host)
	if loaded.ETag != headB.ETag {
		t.Fatal("a fenced save moved the manifest")
	}
	next := save(t, b, headB, dir)
	dst := filepath.Join(t.TempDir(), "r")
	if _, err := b.Restore(ctx, next, dst); err != nil {
		t.Fatal(err)
	}
	if got, want := snapshot(t, dst), snapshot(t, dir); got != want {
		t.Fatal("new holder's checkpoint does not restore its tree")
	}
}

// ACT-15: a store still holding an old-format (tar) checkpoint restores
// it; the next save is a Cas checkpoint, and the tar archive is collected
// once it drops out of the kept history.
func TestACT15RestoresOldTarCheckpoints(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	old := newCheckpointer(t, store, clk, tarFormat)
	dir := filepath.Join(t.TempDir(), "data")
	richTree(t, dir)
	head := save(t, old, claim(t, old, writerA), dir)
	tarKey := head.Manifest.Current.Key
	c := newCheckpointer(t, store, clk, func(c *checkpoint.Config) { c.Keep = 2 })
	head = claim(t, c, writerB)
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := c.Restore(ctx, head, dst); err != nil {
		t.Fatalf("restoring a tar checkpoint with a Cas checkpointer: %v", err)
	}
	if got, want := snapshot(t, dst), snapshot(t, dir); got != want {
		t.Fatal("tar checkpoint restored wrong")
	}
	head = save(t, c, head, dst)
	if head.Manifest.Current.Format != checkpoint.Cas || head.Manifest.History[0].Key != tarKey {
		t.Fatalf("after migration: current %s, history %+v", head.Manifest.Current.Format, head.Manifest.History)
	}
	os.WriteFile(filepath.Join(dst, "zero"), []byte("changed"), 0o644)
	head = save(t, c, head, dst)
	if has(store.Keys(), tarKey) {
		t.Fatal("the tar archive survived dropping out of the history")
	}
}

// ACT-16: a SQLite database written continuously while checkpoints are
// taken restores consistent every time: each restored copy passes
// PRAGMA integrity_check (by the sqlite3 CLI when installed, else the
// library) and holds whole transactions only; its -wal and -shm files are
// not shipped.
func TestACT16SQLiteConsistentUnderWriter(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	c := newCheckpointer(t, store, clk, nil)
	dir := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("plain file"), 0o644)
	dbPath := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, pad TEXT)"); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var commits atomic.Int64
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			tx, err := db.Begin()
			if err != nil {
				continue
			}
			for range 10 {
				tx.Exec("INSERT INTO t (pad) VALUES (?)", strings.Repeat("y", 300))
			}
			if tx.Commit() == nil {
				commits.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	head := claim(t, c, writerA)
	last := -1
	for i := range 6 {
		for commits.Load() < int64(5*(i+1)) {
			<-progress // the writer made progress between checkpoints
		}
		next, st, err := c.Save(ctx, head, dir)
		if err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		head = next
		if st.SQLite != 1 {
			t.Fatalf("save %d shipped %d databases as snapshots, want 1", i, st.SQLite)
		}
		dst := filepath.Join(t.TempDir(), fmt.Sprintf("r%d", i))
		if _, err := c.Restore(ctx, head, dst); err != nil {
			t.Fatalf("restore %d: %v", i, err)
		}
		for _, side := range []string{"-wal", "-shm", "-journal"} {
			if _, err := os.Stat(filepath.Join(dst, "app.db"+side)); err == nil {
				t.Fatalf("restore %d holds app.db%s", i, side)
			}
		}
		res, n := checkDB(t, filepath.Join(dst, "app.db"))
		if res != "ok" || n%10 != 0 || n < last {
			t.Fatalf("restore %d: integrity %q, %d rows (previous %d)", i, res, n, last)
		}
		last = n
	}
}

func checkDB(t *testing.T, path string) (string, int) {
	t.Helper()
	if cli, err := exec.LookPath("sqlite3"); err == nil {
		out, err := exec.Command(cli, path, "PRAGMA integrity_check;", "SELECT count(*) FROM t;").CombinedOutput()
		if err != nil {
			t.Fatalf("sqlite3: %v: %s", err, out)
		}
		lines := strings.Fields(string(out))
		if len(lines) != 2 {
			t.Fatalf("sqlite3 said %q", out)
		}
		var n int
		fmt.Sscan(lines[1], &n)
		return lines[0], n
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	var n int
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return res, n
}

// ACT-15: ReadFile reads one file of a Cas checkpoint, verified.
func TestACT15ReadFile(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	c := newCheckpointer(t, store, clk, nil)
	dir := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "count"), []byte("42\n"), 0o644)
	head := save(t, c, claim(t, c, writerA), dir)
	got, err := c.ReadFile(ctx, host, *head.Manifest.Current, "count")
	if err != nil || string(got) != "42\n" {
		t.Fatalf("ReadFile: %q, %v", got, err)
	}
	if _, err := c.ReadFile(ctx, host, *head.Manifest.Current, "absent"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadFile of an absent file: %v", err)
	}
	corrupt(t, store, blobKeys(store)[0])
	if _, err := c.ReadFile(ctx, host, *head.Manifest.Current, "count"); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("ReadFile of a corrupted blob: %v", err)
	}
}

// ACT-15: a file whose stat (size, mtime, ctime, inode) is unchanged since
// the last save is not read again; a rewrite of the same size with its
// mtime put back is still seen (ctime moved), and files changed within the
// racy gap before a scan are always hashed again.
func TestACT15HashCacheSkipsUnchangedFiles(t *testing.T) {
	store := fake.New(fake.Options{})
	// The file system's timestamps are real; this clock puts the scans an
	// hour after them, so every file is past the racy gap.
	later := clock.NewFake(time.Now().Add(time.Hour))
	c := newCheckpointer(t, store, later, nil)
	dir := filepath.Join(t.TempDir(), "data")
	manyFiles(t, dir, 8, 50_000)
	head, st, err := c.Save(ctx, claim(t, c, writerA), dir)
	if err != nil || st.Hashed != 8*50_000 {
		t.Fatalf("first save hashed %d bytes (%v), want all 400000", st.Hashed, err)
	}
	victim := filepath.Join(dir, "files", "f003")
	info, _ := os.Stat(victim)
	os.WriteFile(victim, bytesOf(50_000, 200), 0o644)
	os.Chtimes(victim, info.ModTime(), info.ModTime()) // same size, same mtime
	head, st, err = c.Save(ctx, head, dir)
	if err != nil || st.Hashed != 50_000 || st.Blobs != 1 {
		t.Fatalf("after a same-size rewrite: hashed %d, blobs %d (%v); want 50000 and 1", st.Hashed, st.Blobs, err)
	}
	dst := filepath.Join(t.TempDir(), "r")
	if _, err := c.Restore(ctx, head, dst); err != nil {
		t.Fatal(err)
	}
	if got, want := snapshot(t, dst), snapshot(t, dir); got != want {
		t.Fatal("restored tree differs after a cached save")
	}
	// Scans right after the writes (real time): nothing is cached.
	now := newCheckpointer(t, store, clock.New(), nil)
	head2 := claim(t, now, writerB)
	_, st, err = now.Save(ctx, head2, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, st2, err := now.Save(ctx, reload(t, now), dir)
	if err != nil || st.Hashed != 8*50_000 || st2.Hashed != 8*50_000 {
		t.Fatalf("racy files: hashed %d then %d (%v), want all both times", st.Hashed, st2.Hashed, err)
	}
}

func reload(t *testing.T, c *checkpoint.Checkpointer) checkpoint.Head {
	t.Helper()
	h, err := c.Load(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// raceStore plays another save that put a blob between this save's
// listing and its upload: the blob is hidden from the first List, and a
// create-only put of it is refused without the body being read.
type raceStore struct {
	*fake.Store
	blob   string
	listed atomic.Bool
}

func (s *raceStore) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	infos, err := s.Store.List(ctx, prefix)
	hide := s.listed.CompareAndSwap(false, true)
	var out []objstore.Info
	for _, info := range infos {
		if !hide || info.Key != s.blob {
			out = append(out, info)
		}
	}
	return out, err
}

func (s *raceStore) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if key == s.blob {
		return "", fmt.Errorf("fake put %s: %w", key, objstore.ErrPreconditionFailed)
	}
	return s.Store.Put(ctx, key, body, cond)
}

// blobPutMeanwhile is a store already holding the sha256 blob of a
// 9 MiB file that another save put, and a data dir holding that file.
type blobPutMeanwhile struct {
	clk   *clock.Fake
	inner *fake.Store
	blob  string
	dir   string
}

func newBlobPutMeanwhile(t *testing.T) blobPutMeanwhile {
	t.Helper()
	clk := clock.NewFake(start)
	inner := fake.New(fake.Options{Clock: clk})
	data := bytesOf(9<<20, 3)
	sum := sha256.Sum256(data)
	blob := "engenho/" + host + "/blobs/" + hex.EncodeToString(sum[:])
	if _, err := inner.Put(ctx, blob, bytes.NewReader(data), objstore.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return blobPutMeanwhile{clk: clk, inner: inner, blob: blob, dir: dir}
}

// ACT-15: a large file whose blob another save put meanwhile (the
// create-only upload refused, its body unread) is saved naming that blob,
// which stays: it was taken for content changed while uploading, and
// that save's blob deleted.
func TestACT15ABlobPutMeanwhileByAnotherSaveStays(t *testing.T) {
	m := newBlobPutMeanwhile(t)
	store := &raceStore{Store: m.inner, blob: m.blob}
	c := newCheckpointer(t, store, m.clk, nil)
	inner, blob, dir := m.inner, m.blob, m.dir
	head, _, err := c.Save(ctx, claim(t, c, writerA), dir)
	if err != nil {
		t.Fatalf("save beside another save's blob: %v", err)
	}
	if !has(inner.Keys(), blob) {
		t.Fatal("the other save's blob was deleted")
	}
	restoreInto(t, c, head, filepath.Join(t.TempDir(), "restored"), dir)
}

// unreadStore is raceStore whose first read of the other save's blob
// fails as a store's transient error does.
type unreadStore struct {
	*raceStore
	failed atomic.Bool
}

func (s *unreadStore) Get(ctx context.Context, key string) (*objstore.Object, error) {
	if key == s.blob && s.failed.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("fake get %s: %w", key, objstore.ErrTransient)
	}
	return s.Store.Get(ctx, key)
}

// ACT-15: a blob another save put meanwhile is read back by this save,
// but a read that fails (a transient error, not content found wrong)
// does not delete it: the save fails and the blob stays, since that
// other save's checkpoint may name it. (Every upload whose read-back
// failed was deleted, this save's or not.)
func TestACT15ABlobPutMeanwhileStaysWhenItsReadBackFails(t *testing.T) {
	m := newBlobPutMeanwhile(t)
	store := &unreadStore{raceStore: &raceStore{Store: m.inner, blob: m.blob}}
	c := newCheckpointer(t, store, m.clk, nil)
	if _, _, err := c.Save(ctx, claim(t, c, writerA), m.dir); !errors.Is(err, objstore.ErrTransient) {
		t.Fatalf("save whose read-back failed: %v, want ErrTransient", err)
	}
	if !store.failed.Load() {
		t.Fatal("the blob was not read back")
	}
	if !has(m.inner.Keys(), m.blob) {
		t.Fatal("the other save's blob was deleted on a failed read")
	}
}
