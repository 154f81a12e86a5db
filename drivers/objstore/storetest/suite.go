package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/engenho/engenho/drivers/objstore"
)

// Caps says what a store does beyond the baseline every store must meet.
type Caps struct {
	// ConditionalDelete: the store honours If-Match on Delete (fs, fake;
	// not MinIO or gofakes3).
	ConditionalDelete bool
	// ConditionalLarge: conditions hold atomically on large (multipart)
	// puts too (not gofakes3, which ignores them on CompleteMultipartUpload).
	ConditionalLarge bool
	// LargePutETagDiffers: the ETag a large (multipart) put returns is not
	// the one Get and List report afterwards (gofakes3). Nothing relies on
	// a large object's ETag (checkpoints carry their own sha256).
	LargePutETagDiffers bool
	// LargeSize is the size of the large-object tests; pick it above the
	// store's multipart threshold. Default 12 MiB.
	LargeSize int
}

// NewStore returns a fresh, empty store (or an empty view of one) for one
// subtest.
type NewStore func(t *testing.T) objstore.Store

// Run runs the suite. Every store must also be an objstore.RangeReader.
func Run(t *testing.T, newStore NewStore, caps Caps) {
	if caps.LargeSize == 0 {
		caps.LargeSize = 12 << 20
	}
	tests := []struct {
		name string
		fn   func(*testing.T, objstore.Store, Caps)
	}{
		{"GetMissing", testGetMissing},
		{"RoundTrip", testRoundTrip},
		{"EmptyObject", testEmptyObject},
		{"Overwrite", testOverwrite},
		{"CreateOnly", testCreateOnly},
		{"IfMatch", testIfMatch},
		{"IfMatchMissing", testIfMatchMissing},
		{"BothConditionsInvalid", testBothConditions},
		{"Delete", testDelete},
		{"ConditionalDelete", testConditionalDelete},
		{"List", testList},
		{"InvalidKeys", testInvalidKeys},
		{"FailedBodyKeepsOld", testFailedBody},
		{"Large", testLarge},
		{"LargeFailedBodyKeepsOld", testLargeFailedBody},
		{"LargeConditional", testLargeConditional},
		{"ConcurrentCreateOnly", testConcurrentCreate},
		{"ConcurrentIfMatch", testConcurrentIfMatch},
		{"Cancelled", testCancelled},
		{"Range", testRange},
		{"RangeEdges", testRangeEdges},
		{"RangeErrors", testRangeErrors},
		{"LargeRange", testLargeRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t), caps) })
	}
}

var ctx = context.Background()

func put(t *testing.T, s objstore.Store, key, body string, cond objstore.Cond) string {
	t.Helper()
	etag, err := s.Put(ctx, key, strings.NewReader(body), cond)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	if etag == "" {
		t.Fatalf("put %s: empty ETag", key)
	}
	return etag
}

func get(t *testing.T, s objstore.Store, key string) (string, objstore.Info) {
	t.Helper()
	obj, err := s.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatalf("get %s: reading: %v", key, err)
	}
	if obj.Size != int64(len(data)) {
		t.Fatalf("get %s: Size %d, body %d bytes", key, obj.Size, len(data))
	}
	return string(data), obj.Info
}

func wantKind(t *testing.T, err, kind error, what string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: got %v, want kind %v", what, err, kind)
	}
}

func testGetMissing(t *testing.T, s objstore.Store, _ Caps) {
	_, err := s.Get(ctx, "missing/key")
	wantKind(t, err, objstore.ErrNotFound, "get missing")
}

func testRoundTrip(t *testing.T, s objstore.Store, _ Caps) {
	etag := put(t, s, "dir/obj.json", `{"a":1}`, objstore.Always)
	body, info := get(t, s, "dir/obj.json")
	if body != `{"a":1}` {
		t.Fatalf("body %q", body)
	}
	if info.ETag != etag {
		t.Fatalf("Get ETag %q, Put returned %q", info.ETag, etag)
	}
	if info.Key != "dir/obj.json" {
		t.Fatalf("Get Key %q", info.Key)
	}
	list, err := s.List(ctx, "dir/")
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if list[0].ETag != etag || list[0].Size != 7 || list[0].Key != "dir/obj.json" {
		t.Fatalf("list entry %+v, want ETag %q size 7", list[0], etag)
	}
}

func testEmptyObject(t *testing.T, s objstore.Store, _ Caps) {
	put(t, s, "empty", "", objstore.CreateOnly())
	body, info := get(t, s, "empty")
	if body != "" || info.Size != 0 {
		t.Fatalf("empty object read back as %q size %d", body, info.Size)
	}
}

func testOverwrite(t *testing.T, s objstore.Store, _ Caps) {
	e1 := put(t, s, "k", "one", objstore.Always)
	e2 := put(t, s, "k", "two", objstore.Always)
	if e1 == e2 {
		t.Fatalf("different contents got the same ETag %q", e1)
	}
	if body, info := get(t, s, "k"); body != "two" || info.ETag != e2 {
		t.Fatalf("after overwrite: %q %q", body, info.ETag)
	}
}

// ACT-5 relies on this: create-only wins once, then loses without writing.
func testCreateOnly(t *testing.T, s objstore.Store, _ Caps) {
	e1 := put(t, s, "lease", "first", objstore.CreateOnly())
	_, err := s.Put(ctx, "lease", strings.NewReader("second"), objstore.CreateOnly())
	wantKind(t, err, objstore.ErrPreconditionFailed, "second create-only")
	if body, info := get(t, s, "lease"); body != "first" || info.ETag != e1 {
		t.Fatalf("losing create-only changed the object: %q %q", body, info.ETag)
	}
}

// ACT-5 relies on this: If-Match replaces only the version it names.
func testIfMatch(t *testing.T, s objstore.Store, _ Caps) {
	e1 := put(t, s, "lease", "v1", objstore.CreateOnly())
	e2 := put(t, s, "lease", "v2", objstore.IfMatch(e1))
	_, err := s.Put(ctx, "lease", strings.NewReader("v3"), objstore.IfMatch(e1))
	wantKind(t, err, objstore.ErrPreconditionFailed, "put on a stale ETag")
	if body, info := get(t, s, "lease"); body != "v2" || info.ETag != e2 {
		t.Fatalf("stale If-Match changed the object: %q %q", body, info.ETag)
	}
	put(t, s, "lease", "v3", objstore.IfMatch(e2))
}

func testIfMatchMissing(t *testing.T, s objstore.Store, _ Caps) {
	e := put(t, s, "other", "x", objstore.Always)
	_, err := s.Put(ctx, "absent", strings.NewReader("x"), objstore.IfMatch(e))
	wantKind(t, err, objstore.ErrPreconditionFailed, "If-Match on a missing key")
	_, err = s.Get(ctx, "absent")
	wantKind(t, err, objstore.ErrNotFound, "get after failed If-Match")
}

func testBothConditions(t *testing.T, s objstore.Store, _ Caps) {
	_, err := s.Put(ctx, "k", strings.NewReader("x"), objstore.Cond{IfNoneMatch: true, IfMatch: "abc"})
	wantKind(t, err, objstore.ErrInvalid, "put with both conditions")
}

func testDelete(t *testing.T, s objstore.Store, _ Caps) {
	put(t, s, "a/b/c", "x", objstore.Always)
	if err := s.Delete(ctx, "a/b/c", objstore.Always); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err := s.Get(ctx, "a/b/c")
	wantKind(t, err, objstore.ErrNotFound, "get after delete")
	if err := s.Delete(ctx, "a/b/c", objstore.Always); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
	put(t, s, "a/b/c", "again", objstore.CreateOnly())
	if list, err := s.List(ctx, "a/"); err != nil || len(list) != 1 {
		t.Fatalf("list after re-create: %v %v", list, err)
	}
}

func testConditionalDelete(t *testing.T, s objstore.Store, caps Caps) {
	if !caps.ConditionalDelete {
		t.Skip("store does not honour If-Match on delete (the lease never relies on it)")
	}
	e1 := put(t, s, "k", "v1", objstore.Always)
	e2 := put(t, s, "k", "v2", objstore.Always)
	wantKind(t, s.Delete(ctx, "k", objstore.IfMatch(e1)), objstore.ErrPreconditionFailed, "delete on a stale ETag")
	if body, _ := get(t, s, "k"); body != "v2" {
		t.Fatalf("stale conditional delete removed the object")
	}
	if err := s.Delete(ctx, "k", objstore.IfMatch(e2)); err != nil {
		t.Fatalf("conditional delete: %v", err)
	}
	wantKind(t, s.Delete(ctx, "k", objstore.IfMatch(e2)), objstore.ErrPreconditionFailed, "conditional delete of a missing key")
}

func testList(t *testing.T, s objstore.Store, _ Caps) {
	// No key is also a "directory" of another: MinIO's listing hides the
	// children of such a key (see objstore.Store.List).
	keys := []string{"a/c", "a/b", "a/bc/d", "ab", "b/x", "a/d/e"}
	etags := map[string]string{}
	for i, k := range keys {
		etags[k] = put(t, s, k, strings.Repeat("x", i+1), objstore.Always)
	}
	cases := map[string][]string{
		"a/b":  {"a/b", "a/bc/d"},
		"a/":   {"a/b", "a/bc/d", "a/c", "a/d/e"},
		"a":    {"a/b", "a/bc/d", "a/c", "a/d/e", "ab"},
		"a/d/": {"a/d/e"},
		"zzz":  nil,
		"b/":   {"b/x"},
	}
	for prefix, want := range cases {
		list, err := s.List(ctx, prefix)
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		var got []string
		for _, info := range list {
			got = append(got, info.Key)
			if info.ETag != etags[info.Key] {
				t.Fatalf("list %q: %s ETag %q, Put gave %q", prefix, info.Key, info.ETag, etags[info.Key])
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("list %q = %v, want %v", prefix, got, want)
		}
	}
}

// SEC-3: keys that could escape a directory or mean two things are refused.
func testInvalidKeys(t *testing.T, s objstore.Store, _ Caps) {
	for _, key := range []string{"", "/abs", "a/../b", "..", "a//b", "a/", "./a", "a\x00b", "a\\b", "sp ace", "tilde~", "a/./b"} {
		_, err := s.Put(ctx, key, strings.NewReader("x"), objstore.Always)
		wantKind(t, err, objstore.ErrInvalid, fmt.Sprintf("put %q", key))
		_, err = s.Get(ctx, key)
		wantKind(t, err, objstore.ErrInvalid, fmt.Sprintf("get %q", key))
		wantKind(t, s.Delete(ctx, key, objstore.Always), objstore.ErrInvalid, fmt.Sprintf("delete %q", key))
	}
	_, err := s.List(ctx, "../")
	wantKind(t, err, objstore.ErrInvalid, "list ../")
}

// failingReader yields data then fails: a connection or disk failing in
// the middle of an upload.
type failingReader struct {
	r io.Reader
}

var errBodyFailed = errors.New("body failed midway")

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errBodyFailed
	}
	return n, err
}

func failingBody(data []byte) io.Reader { return &failingReader{r: bytes.NewReader(data)} }

func testFailedBody(t *testing.T, s objstore.Store, _ Caps) {
	e1 := put(t, s, "ckpt", "old", objstore.Always)
	_, err := s.Put(ctx, "ckpt", failingBody(make([]byte, 4096)), objstore.Always)
	if err == nil {
		t.Fatalf("put with a failing body succeeded")
	}
	if body, info := get(t, s, "ckpt"); body != "old" || info.ETag != e1 {
		t.Fatalf("failed upload replaced the object: %q", body)
	}
	_, err = s.Put(ctx, "fresh", failingBody([]byte("abc")), objstore.CreateOnly())
	if err == nil {
		t.Fatalf("create with a failing body succeeded")
	}
	_, err = s.Get(ctx, "fresh")
	wantKind(t, err, objstore.ErrNotFound, "get after a failed create")
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func testLarge(t *testing.T, s objstore.Store, caps Caps) {
	data := randomBytes(caps.LargeSize+12345, 1)
	etag, err := s.Put(ctx, "big/object", bytes.NewReader(data), objstore.CreateOnly())
	if err != nil {
		t.Fatalf("large put: %v", err)
	}
	obj, err := s.Get(ctx, "big/object")
	if err != nil {
		t.Fatalf("large get: %v", err)
	}
	defer obj.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj.Body)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("large get: %d bytes, %v", n, err)
	}
	if caps.LargePutETagDiffers {
		etag = obj.ETag
	}
	if obj.ETag != etag {
		t.Fatalf("large get: ETag %q, put returned %q", obj.ETag, etag)
	}
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("large object read back different")
	}
	list, err := s.List(ctx, "big/")
	if err != nil || len(list) != 1 || list[0].ETag != etag || list[0].Size != int64(len(data)) {
		t.Fatalf("list large: %+v %v", list, err)
	}
}

func testLargeFailedBody(t *testing.T, s objstore.Store, caps Caps) {
	e1 := put(t, s, "big", "old", objstore.Always)
	_, err := s.Put(ctx, "big", failingBody(randomBytes(caps.LargeSize, 2)), objstore.Always)
	if err == nil {
		t.Fatalf("large put with a failing body succeeded")
	}
	if body, info := get(t, s, "big"); body != "old" || info.ETag != e1 {
		t.Fatalf("failed large upload replaced the object")
	}
}

func testLargeConditional(t *testing.T, s objstore.Store, caps Caps) {
	e1 := put(t, s, "big", "old", objstore.Always)
	data := randomBytes(caps.LargeSize, 3)
	// A condition that already fails must fail on every store (stores may
	// check before uploading); atomicity under a race needs ConditionalLarge.
	_, err := s.Put(ctx, "big", bytes.NewReader(data), objstore.CreateOnly())
	wantKind(t, err, objstore.ErrPreconditionFailed, "large create-only over an existing object")
	_, err = s.Put(ctx, "big", bytes.NewReader(data), objstore.IfMatch("0123456789abcdef"))
	wantKind(t, err, objstore.ErrPreconditionFailed, "large put on a wrong ETag")
	if body, _ := get(t, s, "big"); body != "old" {
		t.Fatalf("failed large conditional put replaced the object")
	}
	e2, err := s.Put(ctx, "big", bytes.NewReader(data), objstore.IfMatch(e1))
	if err != nil {
		t.Fatalf("large put on the right ETag: %v", err)
	}
	if !caps.ConditionalLarge {
		return
	}
	// The ETag from before the large write is stale now.
	_, err = s.Put(ctx, "big", bytes.NewReader(data[:100]), objstore.IfMatch(e1))
	wantKind(t, err, objstore.ErrPreconditionFailed, "put on the ETag before the large write")
	if _, info := get(t, s, "big"); info.ETag != e2 {
		t.Fatalf("ETag moved: %q, want %q", info.ETag, e2)
	}
}

// ACT-14 relies on this: among racing create-only writers exactly one wins.
func testConcurrentCreate(t *testing.T, s objstore.Store, _ Caps) {
	const n = 8
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, results[i] = s.Put(ctx, "race", strings.NewReader("writer "+strconv.Itoa(i)), objstore.CreateOnly())
		})
	}
	wg.Wait()
	winners := 0
	for i, err := range results {
		switch {
		case err == nil:
			winners++
		case !errors.Is(err, objstore.ErrPreconditionFailed):
			t.Fatalf("writer %d: unexpected error %v", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d create-only writers won, want exactly 1", winners)
	}
}

// ACT-5 relies on this: read-modify-write with If-Match loses no update.
func testConcurrentIfMatch(t *testing.T, s objstore.Store, _ Caps) {
	const writers, each = 4, 8
	put(t, s, "counter", "0", objstore.CreateOnly())
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for done := 0; done < each; {
				n, etag, err := readCounter(s)
				if err != nil {
					errs <- err
					return
				}
				_, err = s.Put(ctx, "counter", strings.NewReader(strconv.Itoa(n+1)), objstore.IfMatch(etag))
				switch {
				case err == nil:
					done++
				case !errors.Is(err, objstore.ErrPreconditionFailed):
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("increment: %v", err)
	}
	if body, _ := get(t, s, "counter"); body != strconv.Itoa(writers*each) {
		t.Fatalf("counter = %s after %d increments: an update was lost", body, writers*each)
	}
}

func readCounter(s objstore.Store) (int, string, error) {
	obj, err := s.Get(ctx, "counter")
	if err != nil {
		return 0, "", err
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	if err != nil {
		return 0, "", err
	}
	n, err := strconv.Atoi(string(data))
	return n, obj.ETag, err
}

func testCancelled(t *testing.T, s objstore.Store, _ Caps) {
	put(t, s, "k", "v", objstore.Always)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := s.Get(cctx, "k")
	wantCancelled(t, err, "get")
	_, err = s.Put(cctx, "k", strings.NewReader("w"), objstore.Always)
	wantCancelled(t, err, "put")
	wantCancelled(t, s.Delete(cctx, "k", objstore.Always), "delete")
	_, err = s.List(cctx, "")
	wantCancelled(t, err, "list")
	if body, _ := get(t, s, "k"); body != "v" {
		t.Fatalf("a cancelled put changed the object")
	}
}

func wantCancelled(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, context.Canceled) || !errors.Is(err, objstore.ErrTransient) {
		t.Fatalf("%s with a cancelled context: %v, want transient wrapping context.Canceled", what, err)
	}
}

func ranges(t *testing.T, s objstore.Store) objstore.RangeReader {
	t.Helper()
	rr, ok := s.(objstore.RangeReader)
	if !ok {
		t.Fatalf("%T is not an objstore.RangeReader", s)
	}
	return rr
}

// getRange reads a range and checks the Info describes the whole object.
func getRange(t *testing.T, rr objstore.RangeReader, key string, off, n, size int64) []byte {
	t.Helper()
	obj, err := rr.GetRange(ctx, key, off, n)
	if err != nil {
		t.Fatalf("range %d+%d of %s: %v", off, n, key, err)
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatalf("range %d+%d of %s: reading: %v", off, n, key, err)
	}
	if obj.Size != size || obj.Key != key {
		t.Fatalf("range %d+%d of %s: Info %+v, want the whole object's size %d", off, n, key, obj.Info, size)
	}
	return data
}

// PERF-5: ranges at the start, in the middle and at the end of an object
// read exactly those bytes, with the object's ETag and full size.
func testRange(t *testing.T, s objstore.Store, _ Caps) {
	rr := ranges(t, s)
	data := randomBytes(1000, 4)
	etag, err := s.Put(ctx, "r/obj", bytes.NewReader(data), objstore.Always)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ off, n int64 }{{0, 100}, {300, 200}, {900, 100}, {0, 1000}, {999, 1}} {
		got := getRange(t, rr, "r/obj", r.off, r.n, 1000)
		if !bytes.Equal(got, data[r.off:r.off+r.n]) {
			t.Fatalf("range %d+%d: wrong bytes (%d read)", r.off, r.n, len(got))
		}
	}
	obj, err := rr.GetRange(ctx, "r/obj", 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	obj.Body.Close()
	if obj.ETag != etag {
		t.Fatalf("range ETag %q, put returned %q", obj.ETag, etag)
	}
}

// PERF-5: a range running past the end is cut there; one starting at or
// past the end, and a zero-length one, hold no bytes; an empty object
// has no bytes anywhere.
func testRangeEdges(t *testing.T, s objstore.Store, _ Caps) {
	rr := ranges(t, s)
	data := randomBytes(1000, 5)
	if _, err := s.Put(ctx, "r/obj", bytes.NewReader(data), objstore.Always); err != nil {
		t.Fatal(err)
	}
	if got := getRange(t, rr, "r/obj", 950, 100, 1000); !bytes.Equal(got, data[950:]) {
		t.Fatalf("range past the end: %d bytes, want the last 50", len(got))
	}
	for _, r := range []struct{ off, n int64 }{{1000, 10}, {5000, 10}, {10, 0}, {0, 0}, {1000, 0}} {
		if got := getRange(t, rr, "r/obj", r.off, r.n, 1000); len(got) != 0 {
			t.Fatalf("range %d+%d: %d bytes, want none", r.off, r.n, len(got))
		}
	}
	put(t, s, "r/empty", "", objstore.Always)
	for _, r := range []struct{ off, n int64 }{{0, 10}, {0, 0}, {5, 5}} {
		if got := getRange(t, rr, "r/empty", r.off, r.n, 0); len(got) != 0 {
			t.Fatalf("range %d+%d of an empty object: %d bytes", r.off, r.n, len(got))
		}
	}
}

// PERF-5: a missing key is ErrNotFound whatever the range; a negative
// offset or length and a bad key are ErrInvalid; a cancelled context is
// a transient error wrapping context.Canceled.
func testRangeErrors(t *testing.T, s objstore.Store, _ Caps) {
	rr := ranges(t, s)
	_, err := rr.GetRange(ctx, "r/missing", 0, 10)
	wantKind(t, err, objstore.ErrNotFound, "range of a missing key")
	_, err = rr.GetRange(ctx, "r/missing", 0, 0)
	wantKind(t, err, objstore.ErrNotFound, "zero-length range of a missing key")
	put(t, s, "r/obj", "0123456789", objstore.Always)
	_, err = rr.GetRange(ctx, "r/obj", -1, 5)
	wantKind(t, err, objstore.ErrInvalid, "negative offset")
	_, err = rr.GetRange(ctx, "r/obj", 0, -5)
	wantKind(t, err, objstore.ErrInvalid, "negative length")
	_, err = rr.GetRange(ctx, "/bad//key", 0, 5)
	wantKind(t, err, objstore.ErrInvalid, "bad key")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rr.GetRange(cctx, "r/obj", 0, 5)
	wantCancelled(t, err, "range")
}

// PERF-5: ranges of a large (multipart) object, one across the middle
// where a part boundary may fall, read the right bytes.
func testLargeRange(t *testing.T, s objstore.Store, caps Caps) {
	rr := ranges(t, s)
	data := randomBytes(caps.LargeSize+777, 6)
	if _, err := s.Put(ctx, "big/ranged", bytes.NewReader(data), objstore.Always); err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	half := size / 2
	for _, r := range []struct{ off, n int64 }{{0, 1 << 20}, {half - 100_000, 300_000}, {size - 1000, 4000}} {
		got := getRange(t, rr, "big/ranged", r.off, r.n, size)
		if want := data[r.off:min(r.off+r.n, size)]; !bytes.Equal(got, want) {
			t.Fatalf("large range %d+%d: %d bytes read, want %d, or wrong bytes", r.off, r.n, len(got), len(want))
		}
	}
}
