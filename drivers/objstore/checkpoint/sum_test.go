package checkpoint_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/objstore/checkpoint"
)

// ACT-9, PERF-5: a restore checks an archive against the CRC-32C its
// checkpoint recorded, not its sha256 (the wake path's cheap checksum):
// a wrong CRC-32C fails it whatever the sha256 says, a wrong sha256 beside
// a right CRC-32C does not.
func TestACT9RestoreChecksTheRecordedCRC32C(t *testing.T) {
	_, c := onFake(t, tarFormat)
	src := filepath.Join(t.TempDir(), "data")
	richTree(t, src)
	head := save(t, c, claim(t, c, writerA), src)
	if crc := head.Manifest.Current.CRC32C; len(crc) != 8 {
		t.Fatalf("a new checkpoint records crc32c %q, want 8 hex digits", crc)
	}
	checkRestores(t, c, head, src, []restoreCase{
		{"wrong crc32c", func(e *checkpoint.Entry) { e.CRC32C = flipHex(e.CRC32C) }, false},
		{"wrong sha256, right crc32c", func(e *checkpoint.Entry) { e.SHA256 = flipHex(e.SHA256) }, true},
	})
}

// ACT-9: a checkpoint written before CRC-32C was recorded (no crc32c in
// its manifest entry) is checked with its sha256: it restores, and a
// damaged archive is ErrCorrupt.
func TestACT9ACheckpointWithoutCRC32CIsCheckedWithSHA256(t *testing.T) {
	_, c := onFake(t, tarFormat)
	src := filepath.Join(t.TempDir(), "data")
	richTree(t, src)
	head := save(t, c, claim(t, c, writerA), src)
	checkRestores(t, c, head, src, []restoreCase{
		{"no crc32c", func(e *checkpoint.Entry) { e.CRC32C = "" }, true},
		{"no crc32c, wrong sha256", func(e *checkpoint.Entry) { e.CRC32C, e.SHA256 = "", flipHex(e.SHA256) }, false},
	})
}

// restoreCase is a restore of a checkpoint whose current entry edit
// changed: ok wants it to succeed with the saved tree, !ok to fail with
// ErrCorrupt.
type restoreCase struct {
	name string
	edit func(*checkpoint.Entry)
	ok   bool
}

// checkRestores runs each case against head, saved from src, each into a
// new directory.
func checkRestores(t *testing.T, c *checkpoint.Checkpointer, head checkpoint.Head, src string, cases []restoreCase) {
	t.Helper()
	for _, tc := range cases {
		e := *head.Manifest.Current
		tc.edit(&e)
		edited := head
		edited.Manifest.Current = &e
		dst := filepath.Join(t.TempDir(), "restored")
		_, err := c.Restore(ctx, edited, dst)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: restore: %v", tc.name, err)
		case tc.ok && snapshot(t, dst) != snapshot(t, src):
			t.Errorf("%s: restored tree differs", tc.name)
		case !tc.ok && !errors.Is(err, checkpoint.ErrCorrupt):
			t.Errorf("%s: restore: %v, want ErrCorrupt", tc.name, err)
		}
	}
}

// ACT-15: a Cas index written before CRC-32C was recorded (no "c" on its
// files) restores, each blob checked with its sha256: a damaged blob is
// ErrCorrupt. A new index records a CRC-32C for every file.
func TestACT15AnIndexWithoutCRC32CIsCheckedWithSHA256(t *testing.T) {
	store, c := onFake(t, nil)
	src := filepath.Join(t.TempDir(), "data")
	manyFiles(t, src, 4, 10_000)
	head := save(t, c, claim(t, c, writerA), src)
	head = rewriteIndex(t, store, head, func(idx map[string]any) {
		files := 0
		for _, it := range idx["entries"].([]any) {
			item := it.(map[string]any)
			if item["t"] == "f" {
				if crc, _ := item["c"].(string); len(crc) != 8 {
					t.Errorf("file %v: crc %q, want 8 hex digits", item["p"], crc)
				}
				delete(item, "c")
				files++
			}
		}
		if files != 4 {
			t.Fatalf("the index lists %d files, want 4", files)
		}
	})
	restoreInto(t, c, head, filepath.Join(t.TempDir(), "a"), src) // an index without crc32c
	corrupt(t, store, blobKeys(store)[0])
	if _, err := c.Restore(ctx, head, filepath.Join(t.TempDir(), "b")); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("restore with a damaged blob and no crc32c: %v, want ErrCorrupt", err)
	}
}

// ACT-9: a manifest whose crc32c is not 8 hex digits is refused whole.
func TestACT9AManifestWithABadCRC32CIsRefused(t *testing.T) {
	const m = `{"v":1,"host":"h","holder":"x","node":"n","epoch":1,"written":"2026-01-01T00:00:00Z",` +
		`"current":{"key":"h/ckpt/a.tar","sha256":"` + sixtyFourZeros + `","crc32c":"xyz","size":1,"unpacked":1,"files":1,"format":"tar","created":"2026-01-01T00:00:00Z","node":"n","epoch":1}}`
	if _, err := checkpoint.DecodeManifest([]byte(m)); err == nil {
		t.Fatal("a crc32c of 3 letters was accepted")
	}
	good := strings.Replace(m, `"crc32c":"xyz"`, `"crc32c":"0a1b2c3d"`, 1)
	if _, err := checkpoint.DecodeManifest([]byte(good)); err != nil {
		t.Fatalf("a good crc32c: %v", err)
	}
}

const sixtyFourZeros = "0000000000000000000000000000000000000000000000000000000000000000"

func flipHex(s string) string {
	b := []byte(s)
	if b[0] == '0' {
		b[0] = '1'
	} else {
		b[0] = '0'
	}
	return string(b)
}
