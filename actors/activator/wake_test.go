package activator

import (
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore/fs"
	"github.com/engenho/engenho/messages"
)

func fsStore(t testing.TB, dir string) *fs.Store {
	t.Helper()
	s, err := fs.Open(dir, fs.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ACT-1, ACT-3, ACT-4: a request to an asleep host wakes it (one wake for
// many concurrent requests), then reaches its instance; host.woke names
// every step with its duration.
func TestACT3RequestWakesOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	n := newNode(t, "n1", fsStore(t, t.TempDir()), clk, nodeOpts{})
	n.define(hostDef("web", "notes", "notes.localhost"))
	eventually(t, clk, 0, "host published asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })

	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, _ := n.get("notes.localhost", "/count")
			codes <- code
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("a request got %d", c)
		}
	}
	if creates := n.app.ops("create"); len(creates) != 1 {
		t.Fatalf("instances created: %v", creates)
	}
	if _, body, _ := n.get("notes.localhost", "/read"); body != "8|" {
		t.Fatalf("count after 8 requests: %q", body)
	}
	woke, ok := n.events.last(messages.KindHostWoke)
	if !ok || n.events.count(messages.KindHostWoke) != 1 {
		t.Fatalf("woke events: %d", n.events.count(messages.KindHostWoke))
	}
	for _, step := range []string{"definition", "lease", "restore", "start", "ready"} {
		if _, ok := woke.Fields["step."+step]; !ok {
			t.Fatalf("host.woke lacks step %s: %v", step, woke.Fields)
		}
	}
	if woke.Host != "notes.localhost" || woke.Fields["reason"] != "request" {
		t.Fatalf("woke event %+v", woke)
	}
	if code, _, _ := n.get("other.localhost", "/count"); code != http.StatusNotFound {
		t.Fatalf("unknown host: %d", code)
	}
}

// ACT-7, ACT-8, ACT-9: an idle host sleeps: sidecars stop before the
// instance, a final checkpoint lands, the lease is released, the local copy
// stays; its data survives a wake on a clean node directory.
func TestACT8SleepAndDataSurvives(t *testing.T) {
	clk := clock.NewFake(t0)
	store := fsStore(t, t.TempDir())
	n := newNode(t, "n1", store, clk, nodeOpts{})
	n.define(hostDef("web", "notes", "notes.localhost", withSidecar("ticker", "/bin/sh", "-c", "sleep 3600")))
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	for range 3 {
		if code, _, _ := n.get("notes.localhost", "/count"); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	eventually(t, clk, 0, "sidecar started", func() bool { return len(n.app.running("ticker")) == 1 })
	// Sidecars start after the instance is healthy (ACT-11).
	starts := n.app.ops("start")
	if len(starts) != 2 || !contains(starts[0], "-notes-1-") || contains(starts[0], "ticker") || !contains(starts[1], "ticker") {
		t.Fatalf("start order %v", starts)
	}
	walk(clk, 16*time.Minute, n)
	eventually(t, clk, time.Second, "asleep after idle", func() bool {
		return n.state("notes.localhost") == messages.HostAsleep && n.events.count(messages.KindHostSlept) == 1
	})
	stops := n.app.ops("stop")
	if len(stops) != 2 || !contains(stops[0], "ticker") || contains(stops[1], "ticker") {
		t.Fatalf("stop order %v (sidecars first)", stops)
	}
	if len(n.app.running("")) != 0 {
		t.Fatalf("still running: %v", n.app.running(""))
	}
	local := filepath.Join(n.dir, "hosts", "notes.localhost", "data", "count")
	if b, err := os.ReadFile(local); err != nil || string(b) != "3" {
		t.Fatalf("warm local copy: %q %v", b, err)
	}
	rec := readLease(t, store, "notes.localhost")
	if !rec.Released {
		t.Fatalf("lease not released: %+v", rec)
	}
	// A second node with an empty directory restores the checkpoint.
	if body := readOnSecondNode(t, store, clk); body != "3|" {
		t.Fatalf("restored count %q", body)
	}
}

func contains(s, part string) bool {
	return len(part) > 0 && len(s) >= len(part) && (s == part || indexOf(s, part) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

var _ = stackfile.ReplicationStream
