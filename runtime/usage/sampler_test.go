package usage

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/messages"
)

var t0 = time.Unix(1_700_000_000, 0)

func setup(t *testing.T, phases map[string]string) (*Sampler, *fake.Driver, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	d := fake.New(fake.Options{Clock: clk})
	ctx := context.Background()
	var reps []messages.ReplicaStatus
	slot := 0
	for name, phase := range phases {
		slot++
		if err := d.Create(ctx, drivers.Spec{Name: name, Command: []string{"app"}}); err != nil {
			t.Fatal(err)
		}
		if err := d.Start(ctx, name); err != nil {
			t.Fatal(err)
		}
		reps = append(reps, messages.ReplicaStatus{Stack: "web", Service: "api", Slot: slot, Instance: name, Phase: phase})
	}
	s := New(Options{
		Clock: clk,
		Services: func() []messages.ServiceStatus {
			return []messages.ServiceStatus{{Stack: "web", Service: "api", Driver: "fake", Replicas: reps}}
		},
		Driver: func(name string) (drivers.Driver, bool) {
			return d, name == "fake"
		},
	})
	return s, d, clk
}

// DRV-16: CPU cores are averaged over the last 10 s of samples; memory,
// peak and pids are the last sample's; only running replicas are read.
func TestDRV16CoresOverTheLastTenSeconds(t *testing.T) {
	s, d, clk := setup(t, map[string]string{"a": "serving", "b": "down"})
	ctx := context.Background()
	cpu := time.Duration(0)
	for i, cores := range []float64{0, 0.5, 0.5, 1, 1} {
		cpu += time.Duration(cores * float64(5*time.Second))
		d.SetUsage("a", drivers.Usage{CPU: cpu, MemoryBytes: int64(100 + i), MemoryPeakBytes: 200, Pids: 3})
		s.Round(ctx)
		clk.Advance(5 * time.Second)
	}
	u, ok := s.Get("a")
	if !ok || u.CPUCores == nil {
		t.Fatalf("no sample of a: %+v %v", u, ok)
	}
	// The last three samples span 10s: 1 core for 5s and 1 for 5s.
	if *u.CPUCores != 1 {
		t.Errorf("cores %v, want 1 (the last 10s)", *u.CPUCores)
	}
	if u.MemoryBytes != 104 || u.MemoryPeakBytes != 200 || u.Pids != 3 || u.CPUSeconds != cpu.Seconds() {
		t.Errorf("last sample %+v", u)
	}
	if _, ok := s.Get("b"); ok {
		t.Errorf("a replica that is down was sampled")
	}
	if d.Calls(fake.OpUsage) != 5 {
		t.Errorf("Usage calls %d, want one per round for the one running replica", d.Calls(fake.OpUsage))
	}
	all := s.All()
	if len(all) != 1 || all[0].Stack != "web" || all[0].Service != "api" || all[0].Instance != "a" {
		t.Errorf("All: %+v", all)
	}
}

// DRV-16: a first sample has no cores yet; a counter that goes back (a
// new run) starts the window again; a replica that stops is forgotten.
func TestDRV16FirstSampleResetAndForget(t *testing.T) {
	s, d, clk := setup(t, map[string]string{"a": "probing"})
	ctx := context.Background()
	d.SetUsage("a", drivers.Usage{CPU: 10 * time.Second, MemoryBytes: 1})
	s.Round(ctx)
	if u, _ := s.Get("a"); u.CPUCores != nil {
		t.Errorf("cores from one sample: %v", *u.CPUCores)
	}
	clk.Advance(5 * time.Second)
	d.SetUsage("a", drivers.Usage{CPU: time.Second, MemoryBytes: 1})
	s.Round(ctx)
	if u, _ := s.Get("a"); u.CPUCores != nil {
		t.Errorf("cores across a counter reset: %v", *u.CPUCores)
	}
	d.Kill(ctx, "a")
	clk.Advance(5 * time.Second)
	s.Round(ctx) // still listed as probing, but stopped: zero usage
	if u, _ := s.Get("a"); u.Pids != 0 || u.MemoryBytes != 0 {
		t.Errorf("a stopped instance: %+v", u)
	}
}

// DRV-16: the timer drives rounds; Stop leaves nothing running.
func TestDRV16TimerAndStop(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, d, clk := setup(t, map[string]string{"a": "serving"})
	s.Start()
	for i := 1; i <= 3; i++ {
		clk.Advance(DefaultInterval)
		deadline := time.Now().Add(5 * time.Second)
		for d.Calls(fake.OpUsage) < i && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := d.Calls(fake.OpUsage); got != i {
			t.Fatalf("after %d intervals, %d Usage calls", i, got)
		}
	}
	s.Stop()
	clk.Advance(10 * DefaultInterval)
	time.Sleep(10 * time.Millisecond)
	if got := d.Calls(fake.OpUsage); got != 3 {
		t.Errorf("rounds after Stop: %d calls", got)
	}
}
