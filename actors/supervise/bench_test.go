package supervise

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
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
// message through the supervision layer's cell, in one run: 31 rounds of
// 50,000 messages each way, the two interleaved (which goes first
// alternates), so that the machine's load hits both alike. Each round's
// ratio is supervised ns/msg over raw ns/msg (target ≤ 1.2); it prints
// every round's spread (min, median, max) and reports the median.
func BenchmarkSend(b *testing.B) {
	engine, _ := actor.NewEngine(actor.NewEngineConfig())
	raw := &counter{}
	rawPID := engine.Spawn(func() actor.Receiver { return raw }, "raw")
	sys := NewSystem(engine, clock.New(), zerolog.Nop())
	sup := &counter{}
	supPID := sys.SpawnRoot(ChildSpec{Name: "bench", Produce: func(*Handle) actor.Receiver { return sup }})
	const n, rounds = 50_000, 31
	sendN(engine, rawPID, raw, n) // warm up
	sendN(engine, supPID, sup, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var rawNs, supNs, ratios []float64
		for r := 0; r < rounds; r++ {
			var rawT, supT time.Duration
			if r%2 == 0 {
				rawT, supT = sendN(engine, rawPID, raw, n), sendN(engine, supPID, sup, n)
			} else {
				supT, rawT = sendN(engine, supPID, sup, n), sendN(engine, rawPID, raw, n)
			}
			rawNs, supNs = append(rawNs, float64(rawT)/n), append(supNs, float64(supT)/n)
			ratios = append(ratios, float64(supT)/float64(rawT))
		}
		printSpread(fmt.Sprintf("PERF-2 send, %d rounds of %d messages each way", rounds, n), "ns/msg", rawNs, supNs, ratios)
		b.ReportMetric(median(rawNs), "raw-ns/msg")
		b.ReportMetric(median(supNs), "supervised-ns/msg")
		b.ReportMetric(median(ratios), "ratio")
	}
	b.ReportMetric(0, "ns/op")
	engine.Send(supPID, messages.Shutdown{})
	<-engine.Poison(rawPID).Done()
}

type echo struct{}

func (echo) Receive(c *actor.Context) {
	if _, ok := c.Message().(ping); ok {
		c.Respond(ping{})
	}
}

// paddedEcho answers from a handler with 256 bytes of locals, as any
// handler that does some work has.
type paddedEcho struct{}

func (paddedEcho) Receive(c *actor.Context) {
	if _, ok := c.Message().(ping); ok {
		respondPadded(c)
	}
}

//go:noinline
func respondPadded(c *actor.Context) {
	var scratch [256]byte
	scratch[len(c.PID().ID)%len(scratch)] = 1
	if scratch[0] == 2 {
		panic("unreachable")
	}
	c.Respond(ping{})
}

// requestN makes n requests of pid, one after another, each waiting for
// its reply.
func requestN(b *testing.B, engine *actor.Engine, pid *actor.PID, n int) time.Duration {
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := engine.Request(pid, ping{}, 10*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkRequestReply measures PERF-2 for a round trip: a hollywood
// Request and its Respond, raw against through the supervision layer's
// cell, one request at a time, 31 interleaved rounds of 2,000 each way,
// for two handlers: one that only answers, and one with 256 bytes of
// locals. Hollywood runs each burst of messages in a new goroutine on a
// 2 KiB stack; the bare answer's path fits in it with less than 64 bytes
// to spare, so the cell's frame makes the supervised one grow the stack
// by copying at every request (so does 64 bytes more in the raw
// handler's own frame: measured 1.9 against 3.9 µs a trip). The second
// handler pays that growth either way, which leaves the layer's own cost.
// It prints the spread and reports the medians; target ≤ 1.2.
func BenchmarkRequestReply(b *testing.B) {
	for _, h := range []struct {
		name string
		recv func() actor.Receiver
	}{{"bare answer", func() actor.Receiver { return echo{} }}, {"handler with 256 bytes of locals", func() actor.Receiver { return paddedEcho{} }}} {
		engine, _ := actor.NewEngine(actor.NewEngineConfig())
		rawPID := engine.Spawn(h.recv, "raw-echo")
		sys := NewSystem(engine, clock.New(), zerolog.Nop())
		supPID := sys.SpawnRoot(ChildSpec{Name: "echo", Produce: func(*Handle) actor.Receiver { return h.recv() }})
		const n, rounds = 2_000, 31
		requestN(b, engine, rawPID, n) // warm up
		requestN(b, engine, supPID, n)
		for i := 0; i < b.N; i++ {
			var rawNs, supNs, ratios []float64
			for r := 0; r < rounds; r++ {
				var rawT, supT time.Duration
				if r%2 == 0 {
					rawT, supT = requestN(b, engine, rawPID, n), requestN(b, engine, supPID, n)
				} else {
					supT, rawT = requestN(b, engine, supPID, n), requestN(b, engine, rawPID, n)
				}
				rawNs, supNs = append(rawNs, float64(rawT)/n), append(supNs, float64(supT)/n)
				ratios = append(ratios, float64(supT)/float64(rawT))
			}
			printSpread(fmt.Sprintf("PERF-2 request/reply, %s, %d rounds of %d round trips each way", h.name, rounds, n), "ns/trip", rawNs, supNs, ratios)
			unit := strings.Fields(h.name)[0]
			b.ReportMetric(median(rawNs), "raw-ns/trip-"+unit)
			b.ReportMetric(median(supNs), "supervised-ns/trip-"+unit)
			b.ReportMetric(median(ratios), "ratio-"+unit)
		}
		engine.Send(supPID, messages.Shutdown{})
		<-engine.Poison(rawPID).Done()
	}
	b.ReportMetric(0, "ns/op")
}

func printSpread(title, unit string, raw, sup, ratios []float64) {
	fmt.Printf("\n%s (target: supervised/raw <= 1.2)\n", title)
	fmt.Printf("%-18s  %-10s  %-10s  %s\n", "", "min", "median", "max")
	row := func(name string, v []float64, f string) {
		s := slices.Sorted(slices.Values(v))
		fmt.Printf("%-18s  "+f+"  "+f+"  "+f+"\n", name, s[0], s[len(s)/2], s[len(s)-1])
	}
	row("raw "+unit, raw, "%-10.1f")
	row("supervised "+unit, sup, "%-10.1f")
	row("ratio", ratios, "%-10.3f")
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
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
