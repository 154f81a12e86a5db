package ports

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
)

// inUse is a probe that finds the given ports held by someone else and
// every other port free.
func inUse(held ...int) Probe {
	return func(p int) error {
		for _, h := range held {
			if h == p {
				return &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
			}
		}
		return nil
	}
}

// SVC-24: a real listener holds a port of the range; Take skips it
// ("address already in use") and hands out the next one.
func TestSVC24TakeSkipsAPortInUse(t *testing.T) {
	for attempt := 0; attempt < 5; attempt++ {
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := busy.Addr().(*net.TCPAddr).Port
		if p >= 65535 {
			busy.Close()
			continue
		}
		a := New(Range{p, p + 1}, nil)
		got, err := a.Take()
		busy.Close()
		if errors.Is(err, ErrExhausted) {
			continue // p+1 was taken by someone else on this machine: pick again
		}
		if err != nil {
			t.Fatal(err)
		}
		if got != p+1 {
			t.Fatalf("Take = %d with %d held, want %d", got, p, p+1)
		}
		if !a.InUse(p+1) || a.InUse(p) {
			t.Fatalf("in use after Take: %d %v, %d %v", p+1, a.InUse(p+1), p, a.InUse(p))
		}
		return
	}
	t.Skip("no two adjacent free loopback ports found in 5 tries")
}

// SVC-24: when every port of the range is handed out or held, Take fails
// with ErrExhausted and says which range.
func TestSVC24SpentRange(t *testing.T) {
	a := New(Range{20000, 20002}, inUse(20001))
	for _, want := range []int{20000, 20002} {
		got, err := a.Take()
		if err != nil || got != want {
			t.Fatalf("Take = %d, %v; want %d", got, err, want)
		}
	}
	_, err := a.Take()
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("Take on a spent range: %v, want ErrExhausted", err)
	}
	if want := "no free port left in the range 20000-20002"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// SVC-24: a port just released is not handed out again at once; the walk
// goes on after it and comes back to it only when the rest is used.
func TestSVC24NoImmediateReuse(t *testing.T) {
	a := New(Range{20000, 20002}, inUse())
	first, _ := a.Take()
	a.Release(first)
	second, _ := a.Take()
	if second == first {
		t.Fatalf("released %d handed out again at once", first)
	}
	third, _ := a.Take()
	a.Release(second, third)
	var got []int
	for i := 0; i < 3; i++ {
		p, err := a.Take()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if fmt.Sprint(got) != "[20000 20001 20002]" { // after third (20002): wraps to 20000
		t.Fatalf("order after releases: %v", got)
	}
}

// SVC-24: adopted ports are not handed out while their instances hold them.
func TestSVC24AdoptedNotHandedOut(t *testing.T) {
	a := New(Range{20000, 20002}, inUse())
	a.Adopt(20000, 20001)
	if p, err := a.Take(); err != nil || p != 20002 {
		t.Fatalf("Take = %d, %v; want 20002", p, err)
	}
	if _, err := a.Take(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Take = %v, want ErrExhausted", err)
	}
}

// A probe error other than "in use" (no permission, no such address) ends
// the walk with that error instead of burning the range.
func TestSVC24OtherProbeErrorStops(t *testing.T) {
	a := New(Range{20000, 20002}, func(int) error { return os.NewSyscallError("bind", syscall.EACCES) })
	_, err := a.Take()
	if err == nil || errors.Is(err, ErrExhausted) || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("Take = %v, want the EACCES", err)
	}
}

// SVC-24: one allocator serves every service of the node at once: ports
// taken concurrently are all distinct.
func TestSVC24ConcurrentTakesDistinct(t *testing.T) {
	a := New(Range{20000, 20099}, inUse())
	got := make(chan int, 100)
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := a.Take()
			if err != nil {
				t.Error(err)
				return
			}
			got <- p
		}()
	}
	wg.Wait()
	close(got)
	seen := map[int]bool{}
	for p := range got {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	if len(seen) != 100 {
		t.Fatalf("%d ports handed out, want 100", len(seen))
	}
}
