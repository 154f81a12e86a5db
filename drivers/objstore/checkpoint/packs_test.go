package checkpoint_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/drivers/objstore/fake"
)

func packKeys(keys []string) []string {
	var out []string
	for _, k := range keys {
		if strings.Contains(k, "/blobs/p-") {
			out = append(out, k)
		}
	}
	return out
}

// ACT-15, PERF-5: small files go in packs, not a blob each; a restore
// reads a pack's run of files with one ranged GET and restores the tree.
func TestACT15SmallFilesArePackedAndReadWithOneGET(t *testing.T) {
	store := newRangeStore()
	c := newCheckpointer(t, store, clock.NewFake(start), nil)
	dir := filepath.Join(t.TempDir(), "data")
	manyFiles(t, dir, 256, 32<<10)
	head, st, err := c.Save(ctx, claim(t, c, writerA), dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Blobs != 256 || st.Packed != 256 || st.Packs != 1 {
		t.Fatalf("256 files of 32 KiB saved as %d blobs, %d packed in %d packs; want all 256 in 1 pack", st.Blobs, st.Packed, st.Packs)
	}
	keys := store.Store.(*fake.Store).Keys()
	packs := packKeys(keys)
	if len(packs) != 1 || len(keys) != 3 { // the manifest, the index, the pack
		t.Fatalf("store holds %v", keys)
	}
	restoreInto(t, c, head, filepath.Join(t.TempDir(), "restored"), dir)
	if n := store.ranges[packs[0]]; n != 1 {
		t.Fatalf("the pack was read with %d ranged GETs, want 1", n)
	}
}

// ACT-15: a save reuses the current checkpoint's packed contents, and
// packs again what a pack that went missing held: the save lands and the
// checkpoint restores.
func TestACT15ASaveRepacksWhatAMissingPackHeld(t *testing.T) {
	store, c := onFake(t, nil)
	dir := filepath.Join(t.TempDir(), "data")
	manyFiles(t, dir, 8, 1000)
	head := save(t, c, claim(t, c, writerA), dir)
	head, st, err := c.Save(ctx, head, dir)
	if err != nil || st.Packed != 0 || st.Reused != 8 {
		t.Fatalf("an unchanged save packed %d, reused %d (%v); want 0 and 8", st.Packed, st.Reused, err)
	}
	packs := packKeys(store.Keys())
	if len(packs) != 1 {
		t.Fatalf("packs %v, want 1", packs)
	}
	store.Delete(ctx, packs[0], objstore.Always)
	head, st, err = c.Save(ctx, head, dir)
	if err != nil || st.Packed != 8 || st.Packs != 1 {
		t.Fatalf("a save after the pack went missing packed %d in %d packs (%v); want 8 in 1", st.Packed, st.Packs, err)
	}
	restoreInto(t, c, head, filepath.Join(t.TempDir(), "restored"), dir)
}

// ACT-15: an index names its format: version 2 when some file is packed
// (older builds refuse it rather than look for blobs that are not
// there), 1 when none is.
func TestACT15AnIndexWithPacksIsVersion2(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int
		version float64
	}{{"small files", 1000, 2}, {"large files", 2 << 20, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			store, c := onFake(t, nil)
			dir := filepath.Join(t.TempDir(), "data")
			manyFiles(t, dir, 2, tc.size)
			head := save(t, c, claim(t, c, writerA), dir)
			obj, err := store.Get(ctx, head.Manifest.Current.Key)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(obj.Body)
			obj.Body.Close()
			var idx map[string]any
			json.Unmarshal(data, &idx)
			if idx["v"] != tc.version {
				t.Fatalf("index version %v, want %v", idx["v"], tc.version)
			}
		})
	}
}

// ACT-15, REL-5: an index that names a pack outside the host's blobs, a
// packed file at a negative offset, or one whose end is past what an
// offset can say (which would wrap and read as a short, transient
// download), or a blob by anything but a sha256, is ErrCorrupt, and
// nothing is read from where it points.
func TestACT15AnIndexWithABadPackIsCorrupt(t *testing.T) {
	for name, edit := range map[string]func(item map[string]any){
		"pack outside": func(item map[string]any) { item["pk"] = "../../other/blobs/p-x" },
		"not a pack":   func(item map[string]any) { item["pk"] = "manifest.json" },
		"negative":     func(item map[string]any) { item["o"] = -5 },
		"end overflows": func(item map[string]any) {
			item["o"] = int64(math.MaxInt64 - 10) // the file is 1000 bytes
		},
		// A restore checks CRC-32C, which does not tie a blob to its
		// name as sha256 did: the name must be a sha256.
		"blob not a sha256": func(item map[string]any) { delete(item, "pk"); delete(item, "o"); item["h"] = "" },
	} {
		t.Run(name, func(t *testing.T) {
			store, c := onFake(t, nil)
			dir := filepath.Join(t.TempDir(), "data")
			manyFiles(t, dir, 2, 1000)
			head := save(t, c, claim(t, c, writerA), dir)
			head = rewriteIndex(t, store, head, func(idx map[string]any) {
				for _, it := range idx["entries"].([]any) {
					if item := it.(map[string]any); item["t"] == "f" {
						edit(item)
						break
					}
				}
			})
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

// rewriteIndex edits head's index object in the store, as JSON, and
// returns head with an entry that matches the edited index (its sha256
// and size, and no crc32c: as an entry written before CRC-32C).
func rewriteIndex(t *testing.T, store *fake.Store, head checkpoint.Head, edit func(idx map[string]any)) checkpoint.Head {
	t.Helper()
	e := *head.Manifest.Current
	store.Tamper(e.Key, func(b []byte) []byte {
		var idx map[string]any
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatal(err)
		}
		edit(idx)
		out, _ := json.Marshal(idx)
		sum := sha256.Sum256(out)
		e.SHA256, e.Size, e.CRC32C = hex.EncodeToString(sum[:]), int64(len(out)), ""
		return out
	})
	head.Manifest.Current = &e
	return head
}

// ACT-15, PERF-5: a pack whose files are mostly gone is not kept alive by
// the few that stay: a save packs those again rather than reuse a pack
// the current checkpoint names less than a quarter of, so the store does
// not grow by a pack per batch of small files that leaves one behind.
func TestACT15ASparsePackIsNotReused(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	c := newCheckpointer(t, store, clk, nil) // Keep 3
	dir := filepath.Join(t.TempDir(), "data")
	head := claim(t, c, writerA)
	const batch = 100 * (80 << 10) // one pack's worth of small files
	for round := range 4 {
		// A batch of small files, of which one stays ("keep-N" is packed
		// with them), then saves without the batch.
		manyFiles(t, filepath.Join(dir, "batch"), 100, 80<<10)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("keep-%d", round)), bytesOf(1000, byte(200+round)), 0o644)
		os.WriteFile(filepath.Join(dir, "batch", "files", "f000"), bytesOf(80<<10, byte(100+round)), 0o644) // a new content each round
		clk.Advance(time.Minute)
		head = save(t, c, head, dir)
		os.RemoveAll(filepath.Join(dir, "batch"))
		for range 3 {
			clk.Advance(time.Minute)
			head = save(t, c, head, dir)
		}
	}
	infos, err := store.List(ctx, "engenho/"+host+"/blobs/")
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, info := range infos {
		held += info.Size
	}
	// What the kept checkpoints name is 4 files of 1000 bytes; the last
	// round's batch pack may still be named by the oldest kept one.
	if held > batch+batch/4 {
		t.Fatalf("after 4 rounds the store holds %d bytes in %d blobs and packs, want at most one batch's pack (%d) and a little", held, len(infos), batch)
	}
	for _, e := range append([]checkpoint.Entry{*head.Manifest.Current}, head.Manifest.History...) {
		dst := filepath.Join(t.TempDir(), "r")
		if _, err := c.Restore(ctx, checkpoint.Head{Host: host, Manifest: checkpoint.Manifest{Current: &e}}, dst); err != nil {
			t.Fatalf("kept checkpoint %s: %v", e.Key, err)
		}
	}
	dst := filepath.Join(t.TempDir(), "last")
	if _, err := c.Restore(ctx, head, dst); err != nil || snapshot(t, dst) != snapshot(t, dir) {
		t.Fatalf("the last checkpoint does not restore the tree (%v)", err)
	}
}

// onFake is a checkpointer on a fake store with a fake clock; tune as
// newCheckpointer's.
func onFake(t *testing.T, tune func(*checkpoint.Config)) (*fake.Store, *checkpoint.Checkpointer) {
	t.Helper()
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	return store, newCheckpointer(t, store, clk, tune)
}
