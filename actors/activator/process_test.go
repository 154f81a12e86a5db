package activator

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/process"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/rs/zerolog"
)

// The journal the daemon passes is the real one.
var _ Journal = (*journal.Journal)(nil)

func processDriver(t testing.TB) *process.Driver {
	t.Helper()
	d, err := process.New(process.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// appService is the test binary serving the app, as a process.
func appService(name, hostName string, idle time.Duration) func(*stackfile.Service) {
	return func(s *stackfile.Service) {
		exe, _ := os.Executable()
		s.Command = []string{exe}
		s.Env = stackfile.Env{"ENGENHO_TEST_APP": stackfile.Plain("1")}
		s.Healthcheck.StartInterval = 200 * time.Millisecond
		s.Hibernate.Idle = idle
		s.Hibernate.Seed = []string{"/bin/sh", "-c", `mkdir -p "$ENGENHO_DATA_DIR" && echo seeded > "$ENGENHO_DATA_DIR/seed.txt"`}
	}
}

// ACT-4, ACT-7, ACT-8, ACT-9 with real processes and the fs store: the
// first wake seeds, requests change the state, the idle host sleeps and
// leaves no process behind, and its state comes back from the object store
// when the local copy is gone.
func TestProcessHostRoundTrip(t *testing.T) {
	clk := clock.New()
	store := fsStore(t, t.TempDir())
	drv := processDriver(t)
	n := newNode(t, "n1", store, clk, nodeOpts{driver: drv})
	n.define(hostDef("web", "notes", "notes.localhost", appService("notes", "notes.localhost", 300*time.Millisecond),
		withSidecar("ticker", "/bin/sh", "-c", "while :; do sleep 1; done")))
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	for want := 1; want <= 2; want++ {
		if code, body, _ := n.get("notes.localhost", "/count"); code != http.StatusOK || body != itoa(want) {
			t.Fatalf("request %d: %d %q", want, code, body)
		}
	}
	eventually(t, clk, 0, "asleep after idle", func() bool { return n.events.count(messages.KindHostSlept) == 1 })
	list, err := drv.List(context.Background(), drivers.Labels{drivers.LabelStack: "web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range list {
		if st.State == drivers.StateRunning {
			t.Fatalf("left running after sleep: %s", st.Name)
		}
	}
	if !readLease(t, store, "notes.localhost").Released {
		t.Fatal("lease not released")
	}
	// The warm local copy is gone: the next wake restores from the store.
	if err := os.RemoveAll(filepath.Join(n.dir, "hosts", "notes.localhost")); err != nil {
		t.Fatal(err)
	}
	code, body, _ := n.get("notes.localhost", "/read")
	if code != http.StatusOK || body != "2|seeded" {
		t.Fatalf("after restore: %d %q", code, body)
	}
	woke, _ := n.events.last(messages.KindHostWoke)
	for _, step := range []string{"restore", "start", "ready", "sidecars"} {
		if woke.Fields["step."+step] == "" {
			t.Fatalf("woke without step %s: %v", step, woke.Fields)
		}
	}
	if n.events.count(messages.KindHostWakeFailed) != 0 {
		e, _ := n.events.last(messages.KindHostWakeFailed)
		t.Fatalf("a wake failed: %s", e.Message)
	}
	if strings.Contains(woke.Message, "seed") {
		t.Fatal("the seed ran again on a restore")
	}
}
