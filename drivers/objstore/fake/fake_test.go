package fake_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/fake"
	"github.com/engenho/engenho/drivers/objstore/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

// DRV-8, DRV-11: the fake store meets the same contract as the real ones.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) objstore.Store { return fake.New(fake.Options{Seed: 1}) },
		storetest.Caps{ConditionalDelete: true, ConditionalLarge: true, LargeSize: 1 << 20})
}

// DRV-11: fail the next N calls of an operation with a chosen kind.
func TestFailNext(t *testing.T) {
	s := fake.New(fake.Options{})
	s.FailNext(fake.OpPut, 2, objstore.ErrTransient)
	for i := range 2 {
		_, err := s.Put(ctx, "k", strings.NewReader("v"), objstore.Always)
		if !errors.Is(err, objstore.ErrTransient) {
			t.Fatalf("call %d: %v, want transient", i, err)
		}
	}
	if _, err := s.Put(ctx, "k", strings.NewReader("v"), objstore.Always); err != nil {
		t.Fatalf("third call: %v", err)
	}
	if _, err := s.Get(ctx, "k"); err != nil {
		t.Fatalf("other op affected: %v", err)
	}
	if got := s.Calls(fake.OpPut); got != 3 {
		t.Fatalf("Calls(put) = %d, want 3", got)
	}
}

// DRV-11: latency is measured on the injected clock.
func TestLatencyOnClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	s := fake.New(fake.Options{Clock: clk})
	s.SetLatency(fake.OpGet, 5*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, "missing")
		done <- err
	}()
	if !clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("get did not arm its latency timer")
	}
	select {
	case err := <-done:
		t.Fatalf("get returned before the latency passed: %v", err)
	default:
	}
	clk.Advance(5 * time.Second)
	if err := <-done; !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("after latency: %v", err)
	}
}

// DRV-11: a hung call returns only when its context is cancelled.
func TestHangUntilCancelled(t *testing.T) {
	s := fake.New(fake.Options{})
	s.HangNext(fake.OpList, 1)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.List(cctx, "")
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || !errors.Is(err, objstore.ErrTransient) {
		t.Fatalf("hung list: %v", err)
	}
	if _, err := s.List(ctx, ""); err != nil {
		t.Fatalf("next list: %v", err)
	}
}

// DRV-11: forced conflicts make conditional writes lose, not plain ones.
func TestConflictNext(t *testing.T) {
	s := fake.New(fake.Options{})
	etag, _ := s.Put(ctx, "k", strings.NewReader("v1"), objstore.Always)
	s.ConflictNext(1)
	if _, err := s.Put(ctx, "k", strings.NewReader("v2"), objstore.IfMatch(etag)); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("forced conflict: %v", err)
	}
	if _, err := s.Put(ctx, "k", strings.NewReader("v2"), objstore.IfMatch(etag)); err != nil {
		t.Fatalf("after the conflict: %v", err)
	}
}

// DRV-11: an upload cut midway stores nothing.
func TestCutNextPut(t *testing.T) {
	s := fake.New(fake.Options{})
	s.CutNextPut(10, objstore.ErrTransient)
	_, err := s.Put(ctx, "k", bytes.NewReader(make([]byte, 100)), objstore.Always)
	if !errors.Is(err, objstore.ErrTransient) {
		t.Fatalf("cut put: %v", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("cut put left an object: %v", err)
	}
}

// DRV-11: tampering changes the body and keeps the ETag.
func TestTamper(t *testing.T) {
	s := fake.New(fake.Options{})
	etag, _ := s.Put(ctx, "k", strings.NewReader("good"), objstore.Always)
	if !s.Tamper("k", func(b []byte) []byte { b[0] = 'X'; return b }) {
		t.Fatal("tamper found no object")
	}
	obj, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(obj.Body)
	if string(data) != "Xood" || obj.ETag != etag {
		t.Fatalf("tampered object: %q %q", data, obj.ETag)
	}
}

// DRV-11: the same seed and calls give the same ETags and random faults.
func TestDeterministicUnderSeed(t *testing.T) {
	run := func(seed uint64) string {
		s := fake.New(fake.Options{Seed: seed})
		s.FailRate(fake.OpPut, 0.5, objstore.ErrTransient)
		var out strings.Builder
		for range 40 {
			etag, err := s.Put(ctx, "k", strings.NewReader("v"), objstore.Always)
			if err != nil {
				etag = "fail"
			}
			out.WriteString(etag + " ")
		}
		return out.String()
	}
	a, b, c := run(7), run(7), run(8)
	if a != b {
		t.Fatalf("same seed, different runs:\n%s\n%s", a, b)
	}
	if a == c {
		t.Fatalf("different seeds, same run")
	}
	if !strings.Contains(a, "fail") || strings.Count(a, "fail") == 40 {
		t.Fatalf("fail rate 0.5 gave %d failures of 40", strings.Count(a, "fail"))
	}
}
