package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/drivers/objstore/fake"
	"github.com/engenho/engenho/drivers/objstore/s3"
	"github.com/engenho/engenho/drivers/objstore/s3/s3test"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ACT-9, ACT-15: a checkpoint round-trips files, modes, mtimes, symlinks
// and empty directories, in every format, on every store; sockets are skipped.
func TestRoundTrip(t *testing.T) {
	for _, be := range backends() {
		for _, format := range []checkpoint.Format{checkpoint.Tar, checkpoint.TarGz, checkpoint.Cas} {
			t.Run(be.name+"/"+string(format), func(t *testing.T) {
				clk := clock.NewFake(start)
				c := newCheckpointer(t, be.open(t, clk), clk, func(c *checkpoint.Config) { c.Format = format })
				src := filepath.Join(t.TempDir(), "data")
				richTree(t, src)
				listen(t, filepath.Join(src, "app.sock"))
				head, st, err := c.Save(ctx, claim(t, c, writerA), src)
				if err != nil {
					t.Fatal(err)
				}
				if st.Skipped != 1 || st.Files < 15 || st.Unpacked != int64(300_000+1234+len("#!/bin/sh\necho hi\n")+2+1) {
					t.Fatalf("save stats %+v", st)
				}
				os.Remove(filepath.Join(src, "app.sock"))
				dst := filepath.Join(t.TempDir(), "restored")
				rst, err := c.Restore(ctx, head, dst)
				if err != nil {
					t.Fatal(err)
				}
				if rst.Key != head.Manifest.Current.Key || rst.Files != st.Files {
					t.Fatalf("restore stats %+v, save %+v", rst, st)
				}
				if got, want := snapshot(t, dst), snapshot(t, src); got != want {
					t.Fatalf("restored tree differs\n--- got\n%s\n--- want\n%s", got, want)
				}
			})
		}
	}
}

// ACT-9: an upload that dies midway leaves the previous checkpoint
// current and restorable, and no half-written archive referenced.
func TestInterruptedUploadKeepsPrevious(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			store := &cutStore{Store: be.open(t, clk), after: 150_000}
			c := newCheckpointer(t, store, clk, tarFormat) // the Cas twin: TestACT15InterruptedBlobUpload
			dir := filepath.Join(t.TempDir(), "data")
			richTree(t, dir)
			want := snapshot(t, dir)
			head := save(t, c, claim(t, c, writerA), dir)
			os.WriteFile(filepath.Join(dir, "db/main.sqlite"), bytesOf(400_000, 9), 0o600)
			store.armed = true
			if _, _, err := c.Save(ctx, head, dir); err == nil {
				t.Fatal("save with a cut upload succeeded")
			}
			loaded, err := c.Load(ctx, "app.example.com")
			if err != nil {
				t.Fatal(err)
			}
			if loaded.ETag != head.ETag || loaded.Manifest.Current.Key != head.Manifest.Current.Key {
				t.Fatalf("manifest moved after a failed save")
			}
			dst := filepath.Join(t.TempDir(), "restored")
			if _, err := c.Restore(ctx, loaded, dst); err != nil {
				t.Fatal(err)
			}
			if got := snapshot(t, dst); got != want {
				t.Fatalf("restored tree is not the previous checkpoint")
			}
			infos, _ := store.List(ctx, "engenho/app.example.com/ckpt/")
			if len(infos) != 1 {
				t.Fatalf("archives after a cut upload: %+v", infos)
			}
			// The holder can go on saving on the same head.
			save(t, c, head, dir)
		})
	}
}

// ACT-9: a corrupted archive is detected on restore and never served: the
// target directory keeps what it had and no temporary is left.
func TestCorruptArchiveDetected(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			store := be.open(t, clk)
			c := newCheckpointer(t, store, clk, nil)
			src := filepath.Join(t.TempDir(), "data")
			richTree(t, src)
			head := save(t, c, claim(t, c, writerA), src)
			corrupt(t, store, head.Manifest.Current.Key)
			parent := t.TempDir()
			dst := filepath.Join(parent, "live")
			os.Mkdir(dst, 0o755)
			os.WriteFile(filepath.Join(dst, "keep"), []byte("local"), 0o644)
			_, err := c.Restore(ctx, head, dst)
			if !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("restore of a corrupt archive: %v, want ErrCorrupt", err)
			}
			if data, _ := os.ReadFile(filepath.Join(dst, "keep")); string(data) != "local" {
				t.Fatal("target directory changed")
			}
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				t.Fatalf("leftovers beside the target: %v", entries)
			}
		})
	}
}

// ACT-9: bit rot that keeps the store's ETag (fake.Tamper) and a
// truncated archive are caught by the checksum too.
func TestTamperedAndTruncated(t *testing.T) {
	for name, fn := range map[string]func([]byte) []byte{
		"bit flip":  func(b []byte) []byte { b[len(b)-700] ^= 1; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"appended":  func(b []byte) []byte { return append(b, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(start)
			store := fake.New(fake.Options{Clock: clk})
			c := newCheckpointer(t, store, clk, nil)
			src := filepath.Join(t.TempDir(), "data")
			richTree(t, src)
			head := save(t, c, claim(t, c, writerA), src)
			store.Tamper(head.Manifest.Current.Key, fn)
			dst := filepath.Join(t.TempDir(), "restored")
			if _, err := c.Restore(ctx, head, dst); !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("restore: %v, want ErrCorrupt", err)
			}
			if _, err := os.Stat(dst); !os.IsNotExist(err) {
				t.Fatal("a corrupt restore created the target")
			}
		})
	}
}

// ACT-9: the upload is verified by reading it back; a store that returns
// other bytes fails the save and leaves the manifest where it was.
func TestSaveVerifiesUpload(t *testing.T) {
	clk := clock.NewFake(start)
	inner := fake.New(fake.Options{Clock: clk})
	c := newCheckpointer(t, inner, clk, nil)
	dir := filepath.Join(t.TempDir(), "data")
	richTree(t, dir)
	head := claim(t, c, writerA)
	rotting := &rotOnWrite{Store: inner}
	c2 := newCheckpointer(t, rotting, clk, tarFormat) // the Cas twin: TestACT15SaveVerifiesBlobs
	if _, _, err := c2.Save(ctx, head, dir); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("save onto a rotting store: %v", err)
	}
	loaded, _ := c.Load(ctx, "app.example.com")
	if loaded.ETag != head.ETag || loaded.Manifest.Current != nil {
		t.Fatal("manifest switched to an unverified archive")
	}
	if keys := inner.Keys(); len(keys) != 1 {
		t.Fatalf("unverified archive left behind: %v", keys)
	}
}

// rotOnWrite corrupts every archive right after storing it.
type rotOnWrite struct{ *fake.Store }

func (r *rotOnWrite) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	etag, err := r.Store.Put(ctx, key, body, cond)
	if err == nil && strings.Contains(key, "/ckpt/") {
		r.Store.Tamper(key, func(b []byte) []byte { b[0] ^= 1; return b })
	}
	return etag, err
}

// ACT-6: after another node claims the host, the old holder's save is
// fenced out and leaves nothing behind; the new holder's saves land.
func TestFencedAfterAnotherClaim(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			store := be.open(t, clk)
			a := newCheckpointer(t, store, clk, nil)
			b := newCheckpointer(t, store, clk, nil)
			dir := filepath.Join(t.TempDir(), "data")
			richTree(t, dir)
			headA := save(t, a, claim(t, a, writerA), dir)
			headB := claim(t, b, writerB)
			if headB.Manifest.Current.Key != headA.Manifest.Current.Key || headB.Manifest.Epoch != 2 {
				t.Fatalf("claim lost the current checkpoint: %+v", headB.Manifest)
			}
			_, _, err := a.Save(ctx, headA, dir)
			if !errors.Is(err, checkpoint.ErrFenced) {
				t.Fatalf("stale holder save: %v, want ErrFenced", err)
			}
			infos, _ := store.List(ctx, "engenho/app.example.com/ckpt/")
			if len(infos) != 1 {
				t.Fatalf("fenced save left an archive: %d archives", len(infos))
			}
			next := save(t, b, headB, dir)
			if next.Manifest.Current.Node != "node-b" || next.Manifest.Current.Epoch != 2 {
				t.Fatalf("new holder's entry %+v", next.Manifest.Current)
			}
		})
	}
}

// ACT-9: old archives are collected, keeping the last Keep; orphans of a
// crashed save are deleted once older than OrphanAge, not before.
func TestGarbageCollection(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	// Tar archives; blobs of Cas checkpoints: TestACT15BlobGarbageCollection.
	c := newCheckpointer(t, store, clk, func(c *checkpoint.Config) { c.Keep = 2; c.OrphanAge = time.Hour; c.Format = checkpoint.Tar })
	dir := filepath.Join(t.TempDir(), "data")
	richTree(t, dir)
	orphan := "engenho/app.example.com/ckpt/20250101T000000.000000000Z-dead.tar"
	store.Put(ctx, orphan, strings.NewReader("left by a crash"), objstore.Always)
	head := claim(t, c, writerA)
	var keys []string
	for i := range 4 {
		clk.Advance(time.Minute)
		head = save(t, c, head, dir)
		keys = append(keys, head.Manifest.Current.Key)
		if i == 0 && !has(store.Keys(), orphan) {
			t.Fatal("a young orphan was deleted")
		}
	}
	if len(head.Manifest.History) != 1 || head.Manifest.History[0].Key != keys[2] {
		t.Fatalf("history %+v", head.Manifest.History)
	}
	if !has(store.Keys(), orphan) {
		t.Fatal("orphan deleted before OrphanAge")
	}
	clk.Advance(time.Hour)
	head = save(t, c, head, dir)
	got := store.Keys()
	if has(got, orphan) || has(got, keys[0]) || has(got, keys[1]) || has(got, keys[2]) || !has(got, keys[3]) || !has(got, head.Manifest.Current.Key) {
		t.Fatalf("keys after GC: %v", got)
	}
	if len(got) != 3 { // manifest + current + one kept
		t.Fatalf("keys after GC: %v", got)
	}
}

func has(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// ACT-4, ACT-9: a local copy is fresh only if it is the current
// checkpoint as this node saved or restored it; after another node saved,
// it is stale and must be restored.
func TestFresh(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	a := newCheckpointer(t, store, clk, nil)
	b := newCheckpointer(t, store, clk, nil)
	dirA := filepath.Join(t.TempDir(), "data")
	dirB := filepath.Join(t.TempDir(), "data")
	richTree(t, dirA)
	headA := claim(t, a, writerA)
	if !a.Fresh(headA, dirA) {
		t.Fatal("never-checkpointed local copy with no checkpoint is not fresh")
	}
	headA = save(t, a, headA, dirA)
	if !a.Fresh(headA, dirA) {
		t.Fatal("just-saved copy not fresh")
	}
	headB := claim(t, b, writerB)
	if b.Fresh(headB, dirB) {
		t.Fatal("absent dir is fresh")
	}
	if _, err := b.Restore(ctx, headB, dirB); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dirB, "zero"), []byte("changed on b"), 0o644)
	save(t, b, headB, dirB)
	headA2 := claim(t, a, checkpoint.Writer{Holder: "node-a/2", Node: "node-a", Epoch: 3})
	if a.Fresh(headA2, dirA) {
		t.Fatal("node a's old copy is fresh after node b saved")
	}
	if _, err := a.Restore(ctx, headA2, dirA); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dirA, "zero")); string(data) != "changed on b" {
		t.Fatalf("restore did not bring node b's state: %q", data)
	}
	if !a.Fresh(headA2, dirA) {
		t.Fatal("just-restored copy not fresh")
	}
}

// ACT-4: restoring replaces the whole directory: files not in the
// checkpoint are gone.
func TestRestoreReplacesDirectory(t *testing.T) {
	clk := clock.NewFake(start)
	c := newCheckpointer(t, fake.New(fake.Options{Clock: clk}), clk, nil)
	src := filepath.Join(t.TempDir(), "data")
	richTree(t, src)
	head := save(t, c, claim(t, c, writerA), src)
	dst := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(filepath.Join(dst, "stray/dir"), 0o755)
	os.WriteFile(filepath.Join(dst, "stray/dir/file"), []byte("x"), 0o644)
	restoreInto(t, c, head, dst, src) // the stray files are gone
}

// ACT-4: no checkpoint yet is ErrNoCheckpoint (a first boot runs seed).
func TestNoCheckpoint(t *testing.T) {
	clk := clock.NewFake(start)
	c := newCheckpointer(t, fake.New(fake.Options{Clock: clk}), clk, nil)
	head := claim(t, c, writerA)
	if _, err := c.Restore(ctx, head, filepath.Join(t.TempDir(), "d")); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Fatalf("restore with no checkpoint: %v", err)
	}
	if _, _, err := c.Save(ctx, checkpoint.Head{Host: "app.example.com"}, t.TempDir()); !errors.Is(err, checkpoint.ErrNotClaimed) {
		t.Fatalf("save without a claim: %v", err)
	}
}

// SEC-3: host names are validated before they become keys.
func TestBadHost(t *testing.T) {
	clk := clock.NewFake(start)
	c := newCheckpointer(t, fake.New(fake.Options{Clock: clk}), clk, nil)
	for _, h := range []string{"", "..", "a/b", "a~"} {
		if _, err := c.Claim(ctx, h, writerA); err == nil {
			t.Errorf("claimed host %q", h)
		}
	}
}

// A data directory reached through a symlink is saved as what it points
// at; a restore target's missing parents are created.
func TestSymlinkedDataDirAndNewParent(t *testing.T) {
	clk := clock.NewFake(start)
	c := newCheckpointer(t, fake.New(fake.Options{Clock: clk}), clk, nil)
	real := filepath.Join(t.TempDir(), "real")
	richTree(t, real)
	link := filepath.Join(t.TempDir(), "data")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	head := save(t, c, claim(t, c, writerA), link)
	dst := filepath.Join(t.TempDir(), "new", "parents", "data")
	restoreInto(t, c, head, dst, real)
}

// ACT-9: RestoreDeferred puts the verified tree in place at once; the
// directory is not fresh until settle has synced it and written the marker.
func TestRestoreDeferred(t *testing.T) {
	clk := clock.NewFake(start)
	c := newCheckpointer(t, fake.New(fake.Options{Clock: clk}), clk, func(c *checkpoint.Config) { c.NoSync = false })
	src := filepath.Join(t.TempDir(), "data")
	richTree(t, src)
	head := save(t, c, claim(t, c, writerA), src)
	dst := filepath.Join(t.TempDir(), "data")
	_, settle, err := c.RestoreDeferred(ctx, head, dst)
	if err != nil {
		t.Fatal(err)
	}
	if snapshot(t, dst) != snapshot(t, src) {
		t.Fatal("deferred restore tree differs")
	}
	if c.Fresh(head, dst) {
		t.Fatal("fresh before settle")
	}
	if err := settle(); err != nil {
		t.Fatal(err)
	}
	if !c.Fresh(head, dst) {
		t.Fatal("not fresh after settle")
	}
}

// ambiguousStore answers the manifest's next put with a transient error
// after writing it, as a store whose answer was lost after it committed.
type ambiguousStore struct {
	objstore.Store
	armed atomic.Bool
}

func (s *ambiguousStore) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	etag, err := s.Store.Put(ctx, key, body, cond)
	if err == nil && strings.HasSuffix(key, "/manifest.json") && s.armed.CompareAndSwap(true, false) {
		return "", fmt.Errorf("%w: the answer was lost", objstore.ErrTransient)
	}
	return etag, err
}

// ACT-9: a manifest write whose answer is lost may have landed, so the
// save that failed with it keeps the checkpoint it names: the manifest
// the store holds restores. (It deleted the new archive or index, and a
// manifest that had landed named a missing object.)
func TestACT9AManifestWriteWithALostAnswerKeepsItsCheckpoint(t *testing.T) {
	for _, format := range []checkpoint.Format{checkpoint.Tar, checkpoint.Cas} {
		t.Run(string(format), func(t *testing.T) {
			clk := clock.NewFake(start)
			store := &ambiguousStore{Store: fake.New(fake.Options{Clock: clk})}
			c := newCheckpointer(t, store, clk, func(cfg *checkpoint.Config) { cfg.Format = format })
			src := filepath.Join(t.TempDir(), "data")
			richTree(t, src)
			head := save(t, c, claim(t, c, writerA), src)
			os.WriteFile(filepath.Join(src, "new"), []byte("after the first save"), 0o644)
			store.armed.Store(true)
			if _, _, err := c.Save(ctx, head, src); !errors.Is(err, objstore.ErrTransient) {
				t.Fatalf("save with a lost answer: %v, want ErrTransient", err)
			}
			landed, err := c.Load(ctx, host)
			if err != nil || landed.Manifest.Current == nil || landed.Manifest.Current.Key == head.Manifest.Current.Key {
				t.Fatalf("the store's manifest: %v %+v; want the new checkpoint", err, landed.Manifest.Current)
			}
			restoreInto(t, c, landed, filepath.Join(t.TempDir(), "restored"), src)
		})
	}
}

// retriedStore writes the manifest's next put, then tries it again with
// the same condition and answers what that second try got: a store
// client that retried a write whose answer was lost (the S3 store's SDK
// retries a put up to MaxAttempts) is refused by its own first write.
type retriedStore struct {
	objstore.Store
	armed *atomic.Bool
}

func (s *retriedStore) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if !strings.HasSuffix(key, "/manifest.json") || !s.armed.CompareAndSwap(true, false) {
		return s.Store.Put(ctx, key, body, cond)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return "", err
	}
	if _, err := s.Store.Put(ctx, key, bytes.NewReader(data), cond); err != nil {
		return "", err
	}
	return s.Store.Put(ctx, key, bytes.NewReader(data), cond)
}

// lostAnswerS3 is the S3 store on gofakes3 behind a proxy that, when
// armed, answers the next manifest put the server took with a 503: the
// SDK retries it under the same If-Match, which the server refuses.
func lostAnswerS3(t *testing.T, armed *atomic.Bool) objstore.Store {
	return s3test.Fake(t, func(cfg *s3.Config) {
		upstream, err := url.Parse(cfg.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(upstream)
		proxy.ModifyResponse = func(r *http.Response) error {
			if r.Request.Method != http.MethodPut || !strings.HasSuffix(r.Request.URL.Path, "/manifest.json") ||
				r.StatusCode != http.StatusOK || !armed.CompareAndSwap(true, false) {
				return nil
			}
			r.Body.Close()
			body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>the answer was lost</Message></Error>`
			r.StatusCode, r.Status = http.StatusServiceUnavailable, "503 Service Unavailable"
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
			r.Header.Set("Content-Length", strconv.Itoa(len(body)))
			r.Header.Del("ETag")
			return nil
		}
		srv := httptest.NewServer(proxy)
		t.Cleanup(srv.Close)
		cfg.Endpoint = srv.URL
	})
}

// ACT-9: a manifest write that landed but whose answer was lost, retried
// by the store client and refused by the write itself, fails as fenced
// though no one else wrote: the save that made it keeps the checkpoint
// the manifest names, and, the manifest being its own, succeeds. (It
// took the refusal for another node's claim and deleted the new archive
// or index, which the manifest named: the host could not be restored.)
func TestACT9ARetriedManifestWriteRefusedByItselfKeepsItsCheckpoint(t *testing.T) {
	type setup struct {
		name string
		open func(t *testing.T, clk clock.Clock, armed *atomic.Bool) objstore.Store
	}
	for _, be := range []setup{
		{"fake-retried", func(t *testing.T, clk clock.Clock, armed *atomic.Bool) objstore.Store {
			return &retriedStore{Store: fake.New(fake.Options{Clock: clk}), armed: armed}
		}},
		{"s3-gofakes3-lost-answer", func(t *testing.T, _ clock.Clock, armed *atomic.Bool) objstore.Store {
			return lostAnswerS3(t, armed)
		}},
	} {
		for _, format := range []checkpoint.Format{checkpoint.Tar, checkpoint.Cas} {
			t.Run(be.name+"/"+string(format), func(t *testing.T) {
				clk := clock.NewFake(start)
				var armed atomic.Bool
				c := newCheckpointer(t, be.open(t, clk, &armed), clk, func(cfg *checkpoint.Config) { cfg.Format = format })
				src := filepath.Join(t.TempDir(), "data")
				richTree(t, src)
				head := save(t, c, claim(t, c, writerA), src)
				os.WriteFile(filepath.Join(src, "new"), []byte("after the first save"), 0o644)
				armed.Store(true)
				next, _, saveErr := c.Save(ctx, head, src)
				if armed.Load() {
					t.Fatal("the manifest write was not made ambiguous")
				}
				landed, err := c.Load(ctx, host)
				if err != nil || landed.Manifest.Current == nil || landed.Manifest.Current.Key == head.Manifest.Current.Key {
					t.Fatalf("the store's manifest: %v %+v; want the new checkpoint", err, landed.Manifest.Current)
				}
				dst := filepath.Join(t.TempDir(), "restored")
				if _, err := c.Restore(ctx, landed, dst); err != nil {
					t.Fatalf("restoring what the manifest names (the save said %v): %v", saveErr, err)
				}
				if snapshot(t, dst) != snapshot(t, src) {
					t.Fatal("restored tree differs")
				}
				if saveErr != nil || next.ETag != landed.ETag || next.Manifest.Current == nil || next.Manifest.Current.Key != landed.Manifest.Current.Key {
					t.Fatalf("the save whose manifest landed: %v, head %q %+v; want the landed one, %q", saveErr, next.ETag, next.Manifest.Current, landed.ETag)
				}
				// Still the holder: the next save goes on from that head.
				os.WriteFile(filepath.Join(src, "newer"), []byte("after the second save"), 0o644)
				save(t, c, next, src)
			})
		}
	}
}

// ACT-9: a file that shrinks while a save reads it fails the save with
// ErrChanged, in both formats; the manifest stays on the previous
// checkpoint, which restores, no archive or blob of the failed save is
// left, and the next save of the settled tree succeeds.
func TestACT9AFileThatShrinksWhileSavedFailsTheSave(t *testing.T) {
	for _, format := range []checkpoint.Format{checkpoint.Tar, checkpoint.Cas} {
		t.Run(string(format), func(t *testing.T) {
			clk := clock.NewFake(start)
			store := &shrinkStore{Store: fake.New(fake.Options{Clock: clk})}
			c := newCheckpointer(t, store, clk, func(cfg *checkpoint.Config) { cfg.Format = format })
			dir := filepath.Join(t.TempDir(), "data")
			os.MkdirAll(dir, 0o755)
			store.path = filepath.Join(dir, "big")
			os.WriteFile(store.path, bytesOf(9<<20, 1), 0o644) // above Cas's 8 MiB read whole
			head := save(t, c, claim(t, c, writerA), dir)
			before := store.Keys()
			os.WriteFile(store.path, bytesOf(9<<20, 2), 0o644)
			store.armed = true
			_, _, err := c.Save(ctx, head, dir)
			if !errors.Is(err, checkpoint.ErrChanged) {
				t.Fatalf("save of a file that shrank while read: %v, want ErrChanged", err)
			}
			if after := store.Keys(); strings.Join(after, " ") != strings.Join(before, " ") {
				t.Fatalf("the store after the failed save holds %v, before it %v", after, before)
			}
			loaded, err := c.Load(ctx, head.Host)
			if err != nil || loaded.Manifest.Current.Key != head.Manifest.Current.Key {
				t.Fatalf("manifest after the failed save: %+v, %v; want the previous checkpoint", loaded.Manifest.Current, err)
			}
			restored := filepath.Join(t.TempDir(), "restored")
			if _, err := c.Restore(ctx, loaded, restored); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(restored, "big")); string(got) != string(bytesOf(9<<20, 1)) {
				t.Fatal("the restored file is not the previous checkpoint's")
			}
			next := save(t, c, loaded, dir)
			restoreInto(t, c, next, filepath.Join(t.TempDir(), "next"), dir)
		})
	}
}

// shrinkStore truncates path to half its size once the first put after
// armed has read 64 KiB of its body: a workload writing its file while a
// save reads it.
type shrinkStore struct {
	*fake.Store
	path  string
	armed bool
}

func (s *shrinkStore) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if s.armed {
		s.armed = false
		body = &shrinkReader{r: body, left: 64 << 10, path: s.path}
	}
	return s.Store.Put(ctx, key, body, cond)
}

type shrinkReader struct {
	r    io.Reader
	left int64
	path string
}

func (r *shrinkReader) Read(p []byte) (int, error) {
	if r.left <= 0 && r.path != "" {
		info, err := os.Stat(r.path)
		if err != nil {
			return 0, err
		}
		if err := os.Truncate(r.path, info.Size()/2); err != nil {
			return 0, err
		}
		r.path = ""
	}
	if r.left > 0 && int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.left -= int64(n)
	return n, err
}
