package treetest

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// BenchmarkScale measures PERF-3 on the fake driver with the wall clock:
// convergence from empty, steady-state RSS (after the runtime returns freed
// memory to the OS) and the peak, and idle CPU over 35s once converged (a
// whole 30s probe interval), at 100, 1k and 10k replicas. Run with
// -benchtime=1x.
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				converge, rss, cpu := measureScale(b, n)
				b.ReportMetric(converge.Seconds(), "converge-s")
				b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
				b.ReportMetric(float64(procStatus("VmHWM:"))/(1<<20), "peak-rss-MiB")
				b.ReportMetric(cpu*100, "idle-cpu-%")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

func measureScale(b *testing.B, n int) (time.Duration, uint64, float64) {
	t, err := New(Options{Sweep: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = t.Stop() }()
	start := time.Now()
	if _, err := t.Apply("scale", scaleStack(n)); err != nil {
		b.Fatal(err)
	}
	if !t.WaitFor(5*time.Minute, func() bool { return t.Converged("scale") && healthy(t) == n }) {
		b.Fatalf("not converged: %d of %d healthy", healthy(t), n)
	}
	converge := time.Since(start)
	before := cpuTime()
	time.Sleep(35 * time.Second)
	cpu := (cpuTime() - before).Seconds() / 35
	debug.FreeOSMemory()
	return converge, procStatus("VmRSS:"), cpu
}

func healthy(t *Tree) int {
	n := 0
	for _, s := range t.Board.Services("scale") {
		n += s.Healthy
	}
	return n
}

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
