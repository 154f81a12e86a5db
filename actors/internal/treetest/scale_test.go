package treetest

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/drivertest"
)

// scaleStack renders a stack of n replicas in services of at most 100.
func scaleStack(n int) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := 0; n > 0; i++ {
		r := min(n, 100)
		n -= r
		fmt.Fprintf(&b, `  s%d:
    command: ["worker"]
    healthcheck:
      test: ["CMD", "check"]
      interval: 30s
    deploy:
      replicas: %d
`, i, r)
	}
	return b.String()
}

// PERF-3's targets at 100,000 replicas.
const (
	scaleConvergeTarget = 30 * time.Second
	scaleRSSTarget      = 1536 << 20 // 1.5 GiB
)

// scaleRow is one size's figures.
type scaleRow struct {
	n        int
	converge time.Duration // apply to every replica healthy, wall clock
	cpu      time.Duration // this process's CPU over the same span
	baseRSS  uint64        // before the apply
	steady   uint64        // converged, after a GC that returns freed memory
	peak     uint64        // the high-water mark during the convergence
	heap     uint64        // live heap once converged
	baseHeap uint64
	gor      int // goroutines once converged, above the base
	load     string
}

// BenchmarkScale measures PERF-3 on the fake driver with the wall clock, at
// 1k, 10k and 100k replicas (ENGENHO_SCALE_SIZES, comma-separated, picks
// others) in services of 100 under one stack, each healthchecked every
// 30s: convergence from empty (apply to every replica healthy and every
// service converged), this process's CPU over it, the steady RSS once
// converged (after the runtime returns freed memory to the OS), the peak
// RSS during convergence, the live heap and the goroutines.
// ENGENHO_BENCH_HEAPPROFILE=FILE writes FILE.N, the converged heap's
// profile at each size N; ENGENHO_BENCH_MEMSTATS=1 prints the runtime's
// memory figures once converged. It prints the curve with the
// targets (30s and 1.5 GiB, at 100k) and each size's cost per replica
// against the smallest's: linear is 1.0. It asserts nothing. Idle CPU is
// BenchmarkPERF3IdleCPU's. Run with -benchtime=1x.
func BenchmarkScale(b *testing.B) {
	var rows []scaleRow
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r := measureScale(b, n)
				rows = append(rows, r)
				b.ReportMetric(r.converge.Seconds(), "converge-s")
				b.ReportMetric(float64(r.steady)/(1<<20), "rss-MiB")
				b.ReportMetric(float64(r.peak)/(1<<20), "peak-rss-MiB")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
	printScale(rows)
}

func scaleSizes(b *testing.B) []int {
	v := os.Getenv("ENGENHO_SCALE_SIZES")
	if v == "" {
		return []int{1_000, 10_000, 100_000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("ENGENHO_SCALE_SIZES: %q is not a replica count", f)
		}
		out = append(out, n)
	}
	return out
}

func measureScale(b *testing.B, n int) scaleRow {
	settleMemory()
	r := scaleRow{n: n, baseRSS: procStatus("VmRSS:"), baseHeap: liveHeap(), gor: -runtime.NumGoroutine()}
	resetPeakRSS()
	t, err := New(Options{Sweep: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := t.Stop(); err != nil {
			b.Error(err)
		}
	}()
	cpu0, start := cpuTime(), time.Now()
	if _, err := t.Apply("scale", scaleStack(n)); err != nil {
		b.Fatal(err)
	}
	services := (n + 99) / 100
	done := func() bool {
		c := t.Board.Tally("scale")
		return c.Services == services && c.Converged == services && c.Healthy == n
	}
	// A cheap poll: Tally copies no replica (the board's full copy of
	// 100,000 replicas every few milliseconds would be most of the work).
	for deadline := start.Add(10 * time.Minute); !done(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("not converged after 10 minutes: %+v", t.Board.Tally("scale"))
		}
	}
	r.converge, r.cpu = time.Since(start), cpuTime()-cpu0
	r.load = drivertest.Load()
	r.peak = procStatus("VmHWM:")
	if got := healthy(t); got != n {
		b.Fatalf("the board's replicas say %d of %d healthy", got, n)
	}
	settleMemory()
	r.steady, r.heap = procStatus("VmRSS:"), liveHeap()
	r.gor += runtime.NumGoroutine()
	if os.Getenv("ENGENHO_BENCH_MEMSTATS") != "" {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Printf("memstats n=%d: HeapAlloc %d MiB HeapInuse %d MiB HeapIdle %d HeapReleased %d StackInuse %d MiB MSpan %d MiB GCSys %d MiB OtherSys %d MiB Sys %d MiB RSS %d MiB\n", n,
			m.HeapAlloc>>20, m.HeapInuse>>20, m.HeapIdle>>20, m.HeapReleased>>20, m.StackInuse>>20, m.MSpanInuse>>20, m.GCSys>>20, m.OtherSys>>20, m.Sys>>20, r.steady>>20)
	}
	if f := os.Getenv("ENGENHO_BENCH_HEAPPROFILE"); f != "" {
		if out, err := os.Create(fmt.Sprintf("%s.%d", f, n)); err == nil {
			_ = pprof.Lookup("heap").WriteTo(out, 0)
			out.Close()
		}
	}
	return r
}

func printScale(rows []scaleRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Printf("\nPERF-3 scale on the fake driver: convergence from empty (wall clock, and this process's CPU), RSS and live heap; targets at 100k: converge <= %s, steady RSS <= 1.5 GiB\n", scaleConvergeTarget)
	fmt.Printf("%-9s %-10s %-7s %-8s %-8s %-9s %-10s %-10s %-11s %-10s %-10s %-9s %-8s %s\n",
		"replicas", "converge", "ratio", "cpu", "us/rep", "linear", "rss MiB", "ratio", "peak MiB", "heap/rep", "rss/rep", "linear", "gor/rep", "load")
	first := rows[0]
	perRep := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
	for _, r := range rows {
		rssPer := float64(r.steady-min(r.baseRSS, r.steady)) / float64(r.n)
		heapPer := float64(r.heap-min(r.baseHeap, r.heap)) / float64(r.n)
		firstRSS := float64(first.steady-min(first.baseRSS, first.steady)) / float64(first.n)
		target := func(v, t float64) string {
			if r.n != 100_000 {
				return "-"
			}
			return fmt.Sprintf("%.2f", v/t)
		}
		fmt.Printf("%-9d %-10s %-7s %-8s %-8.1f %-9.2f %-10.0f %-10s %-11.0f %-10s %-10s %-9.2f %-8.2f %s\n",
			r.n, fmt.Sprintf("%.2fs", r.converge.Seconds()), target(r.converge.Seconds(), scaleConvergeTarget.Seconds()),
			fmt.Sprintf("%.1fs", r.cpu.Seconds()), perRep(r.cpu, r.n), perRep(r.cpu, r.n)/perRep(first.cpu, first.n),
			float64(r.steady)/(1<<20), target(float64(r.steady), scaleRSSTarget), float64(r.peak)/(1<<20),
			fmt.Sprintf("%.1f KiB", heapPer/1024), fmt.Sprintf("%.1f KiB", rssPer/1024), rssPer/firstRSS, float64(r.gor)/float64(r.n), r.load)
	}
	fmt.Println("ratio: figure / target (at 100k); linear: cost per replica / the first row's (CPU, then RSS above the base); 1.0 is linear; gor/rep: goroutines once converged per replica")
	for _, r := range rows {
		if r.n != 100_000 {
			continue
		}
		fmt.Printf("PERF-3 at 100k: converge %.1fs, target %s: %s; steady RSS %d MiB, target %d MiB: %s (the fake driver's own model of the instances is in this process too)\n",
			r.converge.Seconds(), scaleConvergeTarget, verdict(r.converge <= scaleConvergeTarget), r.steady>>20, scaleRSSTarget>>20, verdict(r.steady <= scaleRSSTarget))
	}
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

func healthy(t *Tree) int {
	n := 0
	for _, s := range t.Board.Services("scale") {
		for _, r := range s.Replicas {
			if r.Health == "healthy" {
				n++
			}
		}
	}
	return n
}

// settleMemory collects garbage and returns freed memory to the OS, so
// RSS is what is live.
func settleMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// resetPeakRSS resets VmHWM to the current RSS (Linux 4.0+).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatus reads a kB field of /proc/self/status, in bytes.
func procStatus(field string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
