package s3_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/objstore"
)

const rangeBody = "0123456789abcdefghij"

// PERF-5: a server that ignores the Range header and sends the whole
// object (200) still gives the caller exactly the range it asked for.
func TestPERF5RangeIgnoredByServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"e"`)
		w.Write([]byte(rangeBody))
	}))
	defer srv.Close()
	store := storeAt(t, srv.URL, nil)
	for _, r := range []struct {
		off, n int64
		want   string
	}{{0, 5, "01234"}, {7, 3, "789"}, {15, 100, "fghij"}, {30, 5, ""}} {
		obj, err := store.GetRange(context.Background(), "k", r.off, r.n)
		if err != nil {
			t.Fatalf("range %d+%d: %v", r.off, r.n, err)
		}
		data, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		if err != nil || string(data) != r.want || obj.Size != int64(len(rangeBody)) {
			t.Fatalf("range %d+%d: %q (size %d), %v; want %q of a %d-byte object", r.off, r.n, data, obj.Size, err, r.want, len(rangeBody))
		}
	}
}

// PERF-5: a partial answer whose Content-Range does not give the
// object's size is refused (the caller needs it to spot an object that
// is not the size it expects).
func TestPERF5RangeWithoutTotal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-4/*")
		w.WriteHeader(http.StatusPartialContent)
		w.Write([]byte(rangeBody[:5]))
	}))
	defer srv.Close()
	_, err := storeAt(t, srv.URL, nil).GetRange(context.Background(), "k", 0, 5)
	if !errors.Is(err, objstore.ErrInvalid) || !strings.Contains(err.Error(), "Content-Range") {
		t.Fatalf("range without the object size: %v, want an invalid error naming Content-Range", err)
	}
}

// PERF-5, DRV-18: a range whose body stops short of its Content-Length
// is a transient error, never a short range.
func TestPERF5ShortRangeIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Range"); got != "bytes=10-19" {
			http.Error(w, fmt.Sprintf("Range %q", got), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Range", "bytes 10-19/20")
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(http.StatusPartialContent)
		w.Write([]byte(rangeBody[10:14]))
		w.(http.Flusher).Flush()
		c, _, _ := http.NewResponseController(w).Hijack()
		c.Close()
	}))
	defer srv.Close()
	obj, err := storeAt(t, srv.URL, nil).GetRange(context.Background(), "k", 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	if !errors.Is(err, objstore.ErrTransient) || obj.Size != 20 {
		t.Fatalf("range cut at 4 of 10 bytes: %q (size %d), %v; want a transient error", data, obj.Size, err)
	}
}
