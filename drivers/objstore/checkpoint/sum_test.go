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
	cases := []struct {
		name string
		edit func(*checkpoint.Entry)
		ok   bool
	}{
		{"wrong crc32c", func(e *checkpoint.Entry) { e.CRC32C = flipHex(e.CRC32C) }, false},
		{"wrong sha256, right crc32c", func(e *checkpoint.Entry) { e.SHA256 = flipHex(e.SHA256) }, true},
	}
	for _, tc := range cases {
		dst, err := restoreEdited(t, c, head, tc.edit)
		checkRestore(t, tc.name, dst, src, err, tc.ok)
	}
}

// ACT-9: a checkpoint written before CRC-32C was recorded (no crc32c in
// its manifest entry) is checked with its sha256: it restores, and a
// damaged archive is ErrCorrupt.
func TestACT9ACheckpointWithoutCRC32CIsCheckedWithSHA256(t *testing.T) {
	_, c := onFake(t, tarFormat)
	src := filepath.Join(t.TempDir(), "data")
	richTree(t, src)
	head := save(t, c, claim(t, c, writerA), src)
	cases := []struct {
		name string
		edit func(*checkpoint.Entry)
		ok   bool
	}{
		{"no crc32c", func(e *checkpoint.Entry) { e.CRC32C = "" }, true},
		{"no crc32c, wrong sha256", func(e *checkpoint.Entry) { e.CRC32C, e.SHA256 = "", flipHex(e.SHA256) }, false},
	}
	for _, tc := range cases {
		dst, err := restoreEdited(t, c, head, tc.edit)
		checkRestore(t, tc.name, dst, src, err, tc.ok)
	}
}

// restoreEdited restores head with its current entry edited, into a new
// directory it returns.
func restoreEdited(t *testing.T, c *checkpoint.Checkpointer, head checkpoint.Head, edit func(*checkpoint.Entry)) (string, error) {
	t.Helper()
	e := *head.Manifest.Current
	edit(&e)
	head.Manifest.Current = &e
	dst := filepath.Join(t.TempDir(), "restored")
	_, err := c.Restore(ctx, head, dst)
	return dst, err
}

// checkRestore wants a restore that succeeded with dst equal to src, or,
// if !ok, one that failed with ErrCorrupt.
func checkRestore(t *testing.T, name, dst, src string, err error, ok bool) {
	t.Helper()
	switch {
	case ok && err != nil:
		t.Errorf("%s: restore: %v", name, err)
	case ok && snapshot(t, dst) != snapshot(t, src):
		t.Errorf("%s: restored tree differs", name)
	case !ok && !errors.Is(err, checkpoint.ErrCorrupt):
		t.Errorf("%s: restore: %v, want ErrCorrupt", name, err)
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
	dst := filepath.Join(t.TempDir(), "a")
	if _, err := c.Restore(ctx, head, dst); err != nil {
		t.Fatalf("restore of an index without crc32c: %v", err)
	}
	if snapshot(t, dst) != snapshot(t, src) {
		t.Fatal("restored tree differs")
	}
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
