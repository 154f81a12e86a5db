package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// SUP-19: a fake clock fires timers in due order, each at its own time,
// only when advanced.
func TestSUP19FakeFiresInOrder(t *testing.T) {
	f := NewFake(t0)
	var got []string
	f.AfterFunc(2*time.Minute, func() { got = append(got, "b@"+f.Since(t0).String()) })
	f.AfterFunc(time.Minute, func() { got = append(got, "a@"+f.Since(t0).String()) })
	stopped := f.AfterFunc(90*time.Second, func() { got = append(got, "never") })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	tm := f.NewTimer(15 * time.Minute)
	f.Advance(59 * time.Second)
	if len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	f.Advance(15 * time.Minute)
	if len(got) != 2 || got[0] != "a@1m0s" || got[1] != "b@2m0s" {
		t.Fatalf("fired %v", got)
	}
	select {
	case at := <-tm.C():
		if !at.Equal(t0.Add(15 * time.Minute)) {
			t.Fatalf("timer channel got %s", at)
		}
	default:
		t.Fatal("15m timer did not fire")
	}
	if f.Pending() != 0 {
		t.Fatalf("%d timers left", f.Pending())
	}
}

// A timer scheduled from inside a firing callback fires in the same
// Advance when it falls due within it.
func TestFakeNestedTimers(t *testing.T) {
	f := NewFake(t0)
	n := 0
	var again func()
	again = func() {
		n++
		if n < 5 {
			f.AfterFunc(time.Minute, again)
		}
	}
	f.AfterFunc(time.Minute, again)
	f.Advance(time.Hour)
	if n != 5 {
		t.Fatalf("ran %d times", n)
	}
	if !f.Now().Equal(t0.Add(time.Hour)) {
		t.Fatalf("now %s", f.Now())
	}
}

func TestWithTimeoutOnFakeClock(t *testing.T) {
	f := NewFake(t0)
	ctx, cancel := WithTimeout(f, context.Background(), time.Minute)
	defer cancel()
	f.Advance(59 * time.Second)
	if ctx.Err() != nil {
		t.Fatal("ended early")
	}
	f.Advance(time.Second)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
}

func TestWaitForTimers(t *testing.T) {
	f := NewFake(t0)
	go func() {
		time.Sleep(10 * time.Millisecond)
		f.AfterFunc(time.Second, func() {})
	}()
	if !f.WaitForTimers(1, 5*time.Second) {
		t.Fatal("timer not seen")
	}
}
