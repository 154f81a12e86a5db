package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/daemon"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// stopFailing is the process driver with a switch that makes Stop fail,
// as a backend that cannot stop an instance would (SVC-33).
type stopFailing struct {
	drivers.Driver
	fail    *atomic.Bool
	refused *atomic.Int64
}

func (d stopFailing) Stop(ctx context.Context, name string, grace time.Duration) error {
	if d.fail.Load() {
		d.refused.Add(1)
		return drivers.Errorf(d.Name(), "stop", name, drivers.ErrInvalid, "stop refused by the test")
	}
	return d.Driver.Stop(ctx, name, grace)
}

// runIn runs a daemon on dir's config until the returned stop is called.
func runIn(t *testing.T, dir string, hooks *daemon.Hooks) (*control.Client, func()) {
	t.Helper()
	d, err := daemon.New(daemon.Options{ConfigPath: filepath.Join(dir, "engenho.yaml"), Bin: bin, NoSignals: true, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for d.Snapshot().State.Name != lifecycle.Running {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("daemon %s, not running", d.Snapshot().State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := control.Dial(filepath.Join(dir, "data", "control", "engenho.sock"))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var stopped bool
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		c.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("the daemon did not exit")
		}
	}
	t.Cleanup(stop)
	return c, stop
}

func idleStatus(t *testing.T, c *control.Client) messages.ServiceStatus {
	t.Helper()
	st, err := c.Status(t.Context(), control.StatusArgs{Stack: "rs", Service: "idle"})
	if err != nil || len(st.Services) != 1 {
		return messages.ServiceStatus{}
	}
	return st.Services[0]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SVC-33: a retirement the driver refuses is recorded in the journal,
// survives a daemon restart (the next daemon adopts the instance as
// retiring and retries it), keeps its slot from getting a new instance
// until it is gone, and the record goes once it is.
func TestSVC33RetirementPendingAcrossDaemonRestart(t *testing.T) {
	dir := t.TempDir()
	stack := `name: rs
services:
  idle:
    command: ["/bin/sh", "-c", "exec sleep 100000"]
    stop_grace_period: 1s
`
	if err := os.WriteFile(filepath.Join(dir, "rs.yaml"), []byte(stack), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "data_dir: data\nlog: {level: info}\nsweep: {interval: 1s}\nchaos: {enabled: true}\nstacks: [rs.yaml]\n"
	if err := os.WriteFile(filepath.Join(dir, "engenho.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var fail atomic.Bool
	var refused atomic.Int64
	hooks := &daemon.Hooks{WrapDriver: func(d drivers.Driver) drivers.Driver { return stopFailing{d, &fail, &refused} }}

	c, stop := runIn(t, dir, hooks)
	waitFor(t, "converged", func() bool { return converged(idleStatus(t, c)) })
	old := idleStatus(t, c).Replicas[0]
	fail.Store(true)
	if _, err := c.Redeploy(t.Context(), control.ServiceRef{Stack: "rs", Service: "idle"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "retirement pending", func() bool { return len(idleStatus(t, c).RetirementPending) == 1 })
	stop()

	j, err := journal.Open(journal.Options{Dir: filepath.Join(dir, "data", "journal")})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := j.PendingRetirements("rs", "idle")
	j.Close()
	if err != nil || len(pending) != 1 || pending[0].Instance != old.Instance || pending[0].Slot != 1 {
		t.Fatalf("journal after the daemon stopped: %+v %v", pending, err)
	}

	before := refused.Load()
	c, stop = runIn(t, dir, hooks)
	waitFor(t, "adopted as retiring and retried", func() bool {
		st := idleStatus(t, c)
		return len(st.RetirementPending) == 1 && len(st.Replicas) == 1 && st.Replicas[0].ID == old.ID && refused.Load() > before
	})
	// Retried at once by the new daemon, and still no new instance of slot 1.
	if st := idleStatus(t, c); len(st.Replicas) != 1 || st.Replicas[0].ID != old.ID {
		t.Fatalf("slot 1 got a new instance while its retirement is pending: %+v", st.Replicas)
	}
	fail.Store(false)
	waitFor(t, "retired and replaced", func() bool {
		st := idleStatus(t, c)
		return len(st.RetirementPending) == 0 && converged(st) && len(st.Replicas) == 1 && st.Replicas[0].ID != old.ID
	})
	stop()
	j, err = journal.Open(journal.Options{Dir: filepath.Join(dir, "data", "journal")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if pending, err := j.PendingRetirements("rs", "idle"); err != nil || len(pending) != 0 {
		t.Fatalf("journal still holds %+v %v", pending, err)
	}
}
