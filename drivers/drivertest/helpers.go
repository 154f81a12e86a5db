package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
)

// suite carries the harness and this run's unique id through the tests.
type suite struct {
	h   Harness
	d   drivers.Driver
	run string // random, so concurrent runs on one backend never collide
}

func newSuite(h Harness) *suite {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return &suite{h: h, d: h.Driver, run: hex.EncodeToString(b[:])}
}

// name is this run's instance name for tag.
func (s *suite) name(tag string) string {
	return fmt.Sprintf("%s-%s-%s", s.h.Prefix, s.run, tag)
}

// ctx is a context bounded by the harness timeout, cancelled at test end.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// labels are the labels every instance of this run carries, plus extra.
func (s *suite) labels(extra drivers.Labels) drivers.Labels {
	l := drivers.Labels{"drivertest.run": s.run}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// create creates instance tag running script and removes it when t ends.
func (s *suite) create(t *testing.T, tag, script string, extra drivers.Labels) string {
	t.Helper()
	name := s.name(tag)
	spec := s.h.Spec(name, script, s.labels(extra))
	if err := s.d.Create(s.ctx(t), spec); err != nil {
		t.Fatalf("Create %s: %v", name, err)
	}
	t.Cleanup(func() { s.remove(t, name) })
	return name
}

// remove kills and deletes name, tolerating that it is already gone.
func (s *suite) remove(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
	defer cancel()
	if err := s.d.Kill(ctx, name); err != nil && !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("cleanup: Kill %s: %v", name, err)
	}
	if err := s.d.Delete(ctx, name); err != nil && !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("cleanup: Delete %s: %v", name, err)
	}
}

func (s *suite) start(t *testing.T, name string) {
	t.Helper()
	if err := s.d.Start(s.ctx(t), name); err != nil {
		t.Fatalf("Start %s: %v", name, err)
	}
}

func (s *suite) inspect(t *testing.T, name string) drivers.Status {
	t.Helper()
	st, err := s.d.Inspect(s.ctx(t), name)
	if err != nil {
		t.Fatalf("Inspect %s: %v", name, err)
	}
	return st
}

// running starts name and returns its status once Inspect reports it
// running (a backend may pass through "starting").
func (s *suite) running(t *testing.T, name string) drivers.Status {
	t.Helper()
	s.start(t, name)
	return s.waitStatus(t, name, "running", func(st drivers.Status) bool {
		return st.State == drivers.StateRunning
	})
}

// waitStatus polls Inspect until ok holds or the harness timeout passes.
func (s *suite) waitStatus(t *testing.T, name, what string, ok func(drivers.Status) bool) drivers.Status {
	t.Helper()
	var last drivers.Status
	s.eventually(t, name+" "+what, func() bool {
		last = s.inspect(t, name)
		return ok(last)
	})
	return last
}

func (s *suite) waitStopped(t *testing.T, name string) drivers.Status {
	t.Helper()
	return s.waitStatus(t, name, "stopped", func(st drivers.Status) bool {
		return st.State == drivers.StateStopped
	})
}

// eventually polls cond every 10ms until it holds or the timeout passes.
func (s *suite) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(s.h.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", s.h.Timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logs reads name's output with opts (no follow).
func (s *suite) logs(t *testing.T, name string, opts drivers.LogOptions) string {
	t.Helper()
	rc, err := s.d.Logs(s.ctx(t), name, opts)
	if err != nil {
		t.Fatalf("Logs %s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Logs %s: read: %v", name, err)
	}
	return string(b)
}

// waitLogs polls Logs until the output contains want.
func (s *suite) waitLogs(t *testing.T, name, want string) string {
	t.Helper()
	var out string
	s.eventually(t, fmt.Sprintf("%s logs to contain %q", name, want), func() bool {
		out = s.logs(t, name, drivers.LogOptions{})
		return strings.Contains(out, want)
	})
	return out
}

// wantKind fails t unless err is of kind.
func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: got error %v, want kind %v", what, err, kind)
	}
	var de *drivers.Error
	if err != nil && !errors.As(err, &de) {
		t.Errorf("%s: error %v is not a *drivers.Error", what, err)
	}
}

// exitRecorder collects the exits a Watch callback receives.
type exitRecorder struct {
	mu    sync.Mutex
	exits []drivers.Exit
	fired chan struct{} // closed on the first call
}

func newExitRecorder() *exitRecorder { return &exitRecorder{fired: make(chan struct{})} }

func (r *exitRecorder) record(e drivers.Exit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exits = append(r.exits, e)
	if len(r.exits) == 1 {
		close(r.fired)
	}
}

func (r *exitRecorder) calls() []drivers.Exit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]drivers.Exit(nil), r.exits...)
}

// wait blocks until the first call or the timeout.
func (r *exitRecorder) wait(t *testing.T, timeout time.Duration, what string) drivers.Exit {
	t.Helper()
	select {
	case <-r.fired:
		return r.calls()[0]
	case <-time.After(timeout):
		t.Fatalf("gave up after %v waiting for Watch to fire: %s", timeout, what)
		return drivers.Exit{}
	}
}

// settle gives a wrongly late callback the chance to show itself before a
// test checks that it did not happen. It is not a timing assertion: the
// checks pass however long the backend takes.
func settle() { time.Sleep(100 * time.Millisecond) }
