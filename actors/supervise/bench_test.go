package supervise

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/rs/zerolog"
)

type ping struct{}

type counter struct {
	n    atomic.Int64
	done chan struct{}
	want int64
}

func (c *counter) Receive(ctx *actor.Context) {
	if _, ok := ctx.Message().(ping); ok {
		if c.n.Add(1) == c.want {
			close(c.done)
		}
	}
}

func sendN(engine *actor.Engine, pid *actor.PID, c *counter, n int) time.Duration {
	c.n.Store(0)
	c.want = int64(n)
	c.done = make(chan struct{})
	start := time.Now()
	for i := 0; i < n; i++ {
		engine.Send(pid, ping{})
	}
	<-c.done
	return time.Since(start)
}

// BenchmarkSend measures PERF-2: a raw hollywood Send against the same
// message through the supervision layer's cell, side by side in one run.
// The ratio metric is supervised ns/msg over raw ns/msg (target ≤ 1.2).
func BenchmarkSend(b *testing.B) {
	engine, _ := actor.NewEngine(actor.NewEngineConfig())
	raw := &counter{}
	rawPID := engine.Spawn(func() actor.Receiver { return raw }, "raw")
	sys := NewSystem(engine, clock.New(), zerolog.Nop())
	sup := &counter{}
	supPID := sys.SpawnRoot(ChildSpec{Name: "bench", Produce: func(*Handle) actor.Receiver { return sup }})
	const n = 200_000
	sendN(engine, rawPID, raw, n) // warm up
	sendN(engine, supPID, sup, n)
	var rawT, supT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rawT += sendN(engine, rawPID, raw, n)
		supT += sendN(engine, supPID, sup, n)
	}
	b.StopTimer()
	msgs := float64(b.N) * n
	b.ReportMetric(float64(rawT.Nanoseconds())/msgs, "raw-ns/msg")
	b.ReportMetric(float64(supT.Nanoseconds())/msgs, "supervised-ns/msg")
	b.ReportMetric(float64(supT)/float64(rawT), "ratio")
	b.ReportMetric(0, "ns/op")
	engine.Send(supPID, messages.Shutdown{})
	<-engine.Poison(rawPID).Done()
}

// idle is an actor that does nothing.
type idle struct{}

func (idle) Receive(*actor.Context) {}

// BenchmarkIdleActors spawns n supervised idle actors under one supervisor,
// then stops them all: spawn and stop cost per actor and heap per idle
// actor, at 1k, 10k and 100k. Run with -benchtime=1x.
func BenchmarkIdleActors(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("actors=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				spawn, stop, heap := measureIdle(b, n)
				b.ReportMetric(float64(spawn.Nanoseconds())/float64(n), "spawn-ns/actor")
				b.ReportMetric(float64(stop.Nanoseconds())/float64(n), "stop-ns/actor")
				b.ReportMetric(heap/float64(n), "heap-B/actor")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

type spawnMany struct {
	h    *Handle
	n    int
	done chan struct{}
}

func (s *spawnMany) Receive(c *actor.Context) {
	if _, ok := c.Message().(actor.Started); ok {
		kids := s.h.Supervise(Options{})
		for i := 0; i < s.n; i++ {
			_ = kids.Start(ChildSpec{Name: fmt.Sprintf("a%d", i), Produce: func(*Handle) actor.Receiver { return idle{} }})
		}
		close(s.done)
	}
}

func measureIdle(b *testing.B, n int) (spawn, stop time.Duration, heapPerAll float64) {
	engine, _ := actor.NewEngine(actor.NewEngineConfig())
	sys := NewSystem(engine, clock.New(), zerolog.Nop())
	exited := make(chan messages.ChildExited, 1)
	sys.OnRootExit = func(m messages.ChildExited) { exited <- m }
	before := heapInUse()
	done := make(chan struct{})
	start := time.Now()
	root := sys.SpawnRoot(ChildSpec{Name: "root", Produce: func(h *Handle) actor.Receiver { return &spawnMany{h: h, n: n, done: done} }})
	<-done
	for sys.Tree.Len() < n+1 {
		time.Sleep(time.Millisecond)
	}
	spawn = time.Since(start)
	heap := float64(heapInUse() - before)
	start = time.Now()
	engine.Send(root, messages.Shutdown{})
	<-exited
	stop = time.Since(start)
	return spawn, stop, heap
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
