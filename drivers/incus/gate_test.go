package incus

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
)

// DRV-5: a start waits for the file request in flight on the same
// instance (instanceGate): incusd 6.0 blocks a start behind a file helper
// it cannot stop when the start lands while a file request spawns it
// (seen in CI: a box's start blocked for minutes after its init was
// killed, the replica reading its exit code and output meanwhile).
func TestStartWaitsForTheFileRequestInFlight(t *testing.T) {
	f := startFakeIncusd(t)
	f.fileHold = make(chan struct{})
	d, err := New(Options{Socket: f.socket, Project: "p1"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := make(chan error, 1)
	go func() {
		_, err := d.readFile(ctx, "web-1", "/.engenho/output.log", 0)
		read <- err
	}()
	waitEvent(t, f, "file begins")
	started := make(chan error, 1)
	go func() { started <- d.Start(ctx, "web-1") }()
	// The start is held while the read is: nothing reaches incusd.
	select {
	case err := <-started:
		t.Fatalf("Start returned (%v) while a file request was in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(f.fileHold)
	if err := <-read; err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-started; err != nil {
		t.Fatalf("Start: %v", err)
	}
	f.mu.Lock()
	got := slices.Clone(f.events)
	f.mu.Unlock()
	if want := []string{"file begins", "file ends", "start"}; !slices.Equal(got, want) {
		t.Errorf("incusd saw %q, want %q", got, want)
	}
}

// DRV-5: a start waiting for the gate gives up with its context, as a
// transient error that names the instance.
func TestStartWaitingForTheGateEndsWithItsContext(t *testing.T) {
	f := startFakeIncusd(t)
	f.fileHold = make(chan struct{})
	defer close(f.fileHold)
	d, err := New(Options{Socket: f.socket, Project: "p1"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer d.Close()
	go func() { _, _ = d.readFile(context.Background(), "web-1", "/.engenho/output.log", 0) }()
	waitEvent(t, f, "file begins")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = d.Start(ctx, "web-1")
	if !errors.Is(err, drivers.ErrTransient) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start behind a held file request: %v, want a transient deadline error", err)
	}
	var de *drivers.Error
	if !errors.As(err, &de) || de.Op != "start" || de.Instance != "web-1" {
		t.Fatalf("Start behind a held file request: %v, want it to name the start of web-1", err)
	}
}

// The gate forgets an instance once nobody waits for it.
func TestInstanceGateForgetsIdleInstances(t *testing.T) {
	var g instanceGate
	leave, err := g.enter(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.enter(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("enter while held, ctx cancelled: %v", err)
	}
	other, err := g.enter(context.Background(), "b")
	if err != nil {
		t.Fatalf("another instance waits for nobody: %v", err)
	}
	other()
	leave()
	if len(g.slots) != 0 {
		t.Fatalf("slots left: %v", g.slots)
	}
}

func waitEvent(t *testing.T, f *fakeIncusd, e string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		seen := slices.Contains(f.events, e)
		f.mu.Unlock()
		if seen {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("incusd never saw %q", e)
}
