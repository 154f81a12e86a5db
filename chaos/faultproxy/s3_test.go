package faultproxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/engenho/engenho/chaos/faultproxy"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/drivers/objstore/s3"
	"github.com/engenho/engenho/drivers/objstore/s3/s3test"
)

// s3Rig is our S3 store talking to a server through a fault proxy.
type s3Rig struct {
	p      *faultproxy.Proxy
	store  objstore.Store // through the proxy, under the test's prefix
	bucket string
	prefix string // the test's key prefix ("" on gofakes3)
}

// keyPath is the URL path of key (path-style): a fault's PathPrefix.
func (r s3Rig) keyPath(key string) string {
	if r.prefix == "" {
		return "/" + r.bucket + "/" + key
	}
	return "/" + r.bucket + "/" + r.prefix + "/" + key
}

// s3Servers runs fn against gofakes3 and, when ENGENHO_S3_ENDPOINT is set,
// the real MinIO; tune adjusts the proxied store's config.
func s3Servers(t *testing.T, tune func(*s3.Config), fn func(t *testing.T, r s3Rig)) {
	t.Run("gofakes3", func(t *testing.T) {
		faker := gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog()))
		srv := httptest.NewServer(faker.Server())
		t.Cleanup(srv.Close)
		p := startProxy(t, faultproxy.TCP("127.0.0.1:0"), faultproxy.TCP(srv.Listener.Addr().String()), nil)
		cfg := s3.Config{Endpoint: p.URL(), Bucket: "engenho-test", PathStyle: true, AccessKey: "a", SecretKey: "s", Region: "us-east-1"}
		store := openS3(t, cfg, tune)
		if err := store.EnsureBucket(bg); err != nil {
			t.Fatal(err)
		}
		fn(t, s3Rig{p: p, store: store, bucket: cfg.Bucket})
	})
	t.Run("minio", func(t *testing.T) {
		// RealStore skips (or fails under ENGENHO_REQUIRE=s3) without a
		// server, and deletes the test's prefix at the end.
		_, prefix := s3test.RealStore(t, nil)
		cfg, _ := s3test.ConfigFromEnv()
		u, err := url.Parse(cfg.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		p := startProxy(t, faultproxy.TCP("127.0.0.1:0"), faultproxy.TCP(u.Host), nil)
		cfg.Endpoint = p.URL()
		store := openS3(t, cfg, tune)
		fn(t, s3Rig{p: p, store: objstore.Prefixed(store, prefix), bucket: cfg.Bucket, prefix: prefix})
	})
}

func openS3(t *testing.T, cfg s3.Config, tune func(*s3.Config)) *s3.Store {
	t.Helper()
	if tune != nil {
		tune(&cfg)
	}
	store, err := s3.New(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func putBytes(r s3Rig, key string, data []byte, cond objstore.Cond) (string, error) {
	return r.store.Put(bg, key, bytes.NewReader(data), cond)
}

func getBytes(r s3Rig, key string) ([]byte, error) {
	obj, err := r.store.Get(bg, key)
	if err != nil {
		return nil, err
	}
	defer obj.Body.Close()
	return io.ReadAll(obj.Body)
}

// DRV-10, CHS-2: 503 SlowDown and 500 InternalError twice are absorbed by
// the SDK's retries (3 attempts): puts, conditional puts and gets succeed;
// a third throttled answer in a row is a transient error.
func TestS3StoreRetriesThroughSlowDown(t *testing.T) {
	s3Servers(t, nil, func(t *testing.T, r s3Rig) {
		mustArm(t, r.p, faultproxy.S3SlowDown().Times(2).On(http.MethodPut, ""))
		if _, err := putBytes(r, "a", []byte("one"), objstore.Always); err != nil {
			t.Fatalf("put through SlowDown ×2: %v", err)
		}
		mustArm(t, r.p, faultproxy.S3SlowDown().Times(2).On(http.MethodPut, ""))
		etag, err := putBytes(r, "b", []byte("two"), objstore.CreateOnly())
		if err != nil {
			t.Fatalf("create-only put through SlowDown ×2: %v", err)
		}
		if _, err := putBytes(r, "b", []byte("again"), objstore.CreateOnly()); !errors.Is(err, objstore.ErrPreconditionFailed) {
			t.Fatalf("second create-only put: %v, want precondition failed", err)
		}
		mustArm(t, r.p, faultproxy.S3InternalError().Times(2).On(http.MethodPut, ""))
		if _, err := putBytes(r, "b", []byte("three"), objstore.IfMatch(etag)); err != nil {
			t.Fatalf("if-match put through InternalError ×2: %v", err)
		}
		mustArm(t, r.p, faultproxy.S3InternalError().Times(2).On(http.MethodGet, r.keyPath("b")))
		if data, err := getBytes(r, "b"); err != nil || string(data) != "three" {
			t.Fatalf("get through InternalError ×2: %q, %v", data, err)
		}
		if st := r.p.Stats(); st.Applied[faultproxy.Status] != 8 {
			t.Errorf("%d status faults applied, want 8", st.Applied[faultproxy.Status])
		}

		mustArm(t, r.p, faultproxy.S3SlowDown().Times(3).On(http.MethodPut, ""))
		if _, err := putBytes(r, "c", []byte("x"), objstore.Always); !errors.Is(err, objstore.ErrTransient) {
			t.Fatalf("put through SlowDown ×3 (every attempt): %v, want transient", err)
		}
	})
}

// DRV-18, CHS-2: a GET cut short is an error, never the object; the next
// GET reads it whole.
func TestS3StoreTruncatedGetIsAnError(t *testing.T) {
	s3Servers(t, nil, func(t *testing.T, r s3Rig) {
		data := blob(100000)
		if _, err := putBytes(r, "obj", data, objstore.Always); err != nil {
			t.Fatal(err)
		}
		mustArm(t, r.p, faultproxy.TruncateFault(faultproxy.Half).Times(1))
		got, err := getBytes(r, "obj")
		if !errors.Is(err, objstore.ErrTransient) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("truncated get: %d bytes, %v; want a transient error", len(got), err)
		}
		if got, err := getBytes(r, "obj"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get after the fault: %d bytes, %v", len(got), err)
		}
	})
}

// ACT-9, DRV-18, CHS-2: a checkpoint restore that meets a truncated blob
// (or index) fails and leaves the data directory as it was; once the
// fault is gone the restore brings the checkpoint back whole.
func TestS3CheckpointRestoreRefusesTruncatedDownloads(t *testing.T) {
	s3Servers(t, nil, func(t *testing.T, r s3Rig) {
		cps, err := checkpoint.New(checkpoint.Config{Store: r.store, Prefix: "cp", NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(t.TempDir(), "src")
		os.MkdirAll(src, 0o755)
		want := blob(200000)
		os.WriteFile(filepath.Join(src, "data.bin"), want, 0o644)
		head, err := cps.Claim(bg, "host", checkpoint.Writer{Holder: "h1", Node: "n1", Epoch: 1})
		if err != nil {
			t.Fatal(err)
		}
		if head, _, err = cps.Save(bg, head, src); err != nil {
			t.Fatal(err)
		}

		dst := filepath.Join(t.TempDir(), "dst")
		os.MkdirAll(dst, 0o755)
		os.WriteFile(filepath.Join(dst, "old.txt"), []byte("old"), 0o644)
		for _, prefix := range []string{r.keyPath("cp/host/blobs/"), r.keyPath("cp/host/ckpt/")} {
			mustArm(t, r.p, faultproxy.TruncateFault(faultproxy.Half).Times(1).On(http.MethodGet, prefix))
			if _, err := cps.Restore(bg, head, dst); err == nil {
				t.Fatalf("restore with a truncated download under %s succeeded", prefix)
			}
			if names := dirNames(t, dst); len(names) != 1 || names[0] != "old.txt" {
				t.Fatalf("after a failed restore the data directory holds %v, want it as it was", names)
			}
		}
		if st := r.p.Stats(); st.Applied[faultproxy.Truncate] != 2 {
			t.Fatalf("%d truncations, want 2 (one blob, one index)", st.Applied[faultproxy.Truncate])
		}
		if _, err := cps.Restore(bg, head, dst); err != nil {
			t.Fatalf("restore after the fault: %v", err)
		}
		if got, err := os.ReadFile(filepath.Join(dst, "data.bin")); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("restored data: %d bytes, %v", len(got), err)
		}
	})
}

func dirNames(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// DRV-18, CHS-2: a blackholed server (accepts, never answers) makes a call
// without a deadline fail after IOTimeout per attempt, each attempt held by
// the proxy, instead of hanging; when the blackhole ends, calls succeed.
func TestS3StoreTimesOutOnBlackhole(t *testing.T) {
	tune := func(c *s3.Config) { c.IOTimeout = 300 * time.Millisecond; c.MaxAttempts = 2 }
	s3Servers(t, tune, func(t *testing.T, r s3Rig) {
		id := mustArm(t, r.p, faultproxy.BlackholeFault(0))
		done := make(chan error, 1)
		go func() {
			_, err := putBytes(r, "k", []byte("v"), objstore.CreateOnly())
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatal("a put into a blackhole still waits after a minute: the store hangs")
		}
		var ne net.Error
		if !errors.Is(err, objstore.ErrTransient) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("put into a blackhole: %v, want a transient timeout", err)
		}
		if n := r.p.Stats().Applied[faultproxy.Blackhole]; n != 2 {
			t.Errorf("the blackhole held %d requests, want 2 (one per attempt)", n)
		}
		r.p.Disarm(id)
		if _, err := putBytes(r, "k", []byte("v"), objstore.CreateOnly()); err != nil {
			t.Fatalf("put after the blackhole: %v", err)
		}
	})
}

// CHS-2: the proxy down (a server restart as the client sees it) fails a
// call with a transient error once the SDK's attempts are refused; up
// again, calls succeed.
func TestS3StoreThroughDown(t *testing.T) {
	s3Servers(t, nil, func(t *testing.T, r s3Rig) {
		id := mustArm(t, r.p, faultproxy.DownFault(0))
		if _, err := putBytes(r, "k", []byte("v"), objstore.Always); !errors.Is(err, objstore.ErrTransient) {
			t.Fatalf("put while down: %v, want transient", err)
		}
		r.p.Disarm(id)
		if _, err := putBytes(r, "k", []byte("v"), objstore.Always); err != nil {
			t.Fatalf("put after down: %v", err)
		}
	})
}

// CHS-2: a put whose answer is lost (cut after the server applied it) is
// retried by the SDK. Unconditional, the retry simply succeeds. Create-only,
// the retry fails its own condition: the store reports precondition failed
// although the object is the caller's. The lease and the checkpoint
// manifest take that as lost and stand down (safe); the campaign must
// expect it. This test pins the behaviour down.
func TestS3StoreLostAnswerOnConditionalPut(t *testing.T) {
	s3Servers(t, nil, func(t *testing.T, r s3Rig) {
		mustArm(t, r.p, faultproxy.ResetFault(faultproxy.BeforeHeaders).Times(1).On(http.MethodPut, ""))
		if _, err := putBytes(r, "plain", []byte("mine"), objstore.Always); err != nil {
			t.Fatalf("unconditional put with its first answer lost: %v", err)
		}
		mustArm(t, r.p, faultproxy.ResetFault(faultproxy.BeforeHeaders).Times(1).On(http.MethodPut, ""))
		_, err := putBytes(r, "lease", []byte("mine"), objstore.CreateOnly())
		if !errors.Is(err, objstore.ErrPreconditionFailed) {
			t.Fatalf("create-only put with its first answer lost: %v, want precondition failed (the retry meets the first attempt's object)", err)
		}
		if got, err := getBytes(r, "lease"); err != nil || string(got) != "mine" {
			t.Fatalf("the object: %q, %v; want the caller's own", got, err)
		}
		if st := r.p.Stats(); st.Applied[faultproxy.Reset] != 2 {
			t.Errorf("%d resets, want 2", st.Applied[faultproxy.Reset])
		}
	})
}
