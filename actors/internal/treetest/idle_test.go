package treetest

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/drivertest"
)

// idleStack renders n replicas in services of at most 100, with a
// healthcheck every interval (none when interval is "").
func idleStack(n int, interval string) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := 0; n > 0; i++ {
		r := min(n, 100)
		n -= r
		fmt.Fprintf(&b, "  s%d:\n    command: [\"worker\"]\n    deploy: {replicas: %d}\n", i, r)
		if interval != "" {
			fmt.Fprintf(&b, "    healthcheck: {test: [\"CMD\", \"check\"], interval: %s}\n", interval)
		}
	}
	return b.String()
}

// BenchmarkPERF3IdleCPU measures PERF-3's idle CPU at 10,000 replicas on
// the fake driver (target: 1% of a core), with the daemon's default sweep
// (10s): converged and settled (20s), then this process's CPU over
// ENGENHO_BENCH_WINDOW (default 60s), without a healthcheck and with one
// every 30s (Compose's default interval). It prints a table with the
// figure, the target and their ratio; it asserts nothing.
// ENGENHO_BENCH_PROFILE=FILE writes a CPU profile of the last window.
// Run: go test -run '^$' -bench PERF3IdleCPU -benchtime 1x ./actors/internal/treetest/
func BenchmarkPERF3IdleCPU(b *testing.B) {
	window := 60 * time.Second
	if v, err := time.ParseDuration(os.Getenv("ENGENHO_BENCH_WINDOW")); err == nil {
		window = v
	}
	const n, target = 10_000, 0.01
	type row struct {
		health string
		cpu    float64
	}
	var rows []row
	for i := 0; i < b.N; i++ {
		for _, health := range healthCases() {
			rows = append(rows, row{health, idleCPU(b, n, health, window)})
		}
	}
	fmt.Printf("\nPERF-3 idle CPU on the fake driver, %d replicas, sweep 10s, this process's CPU over %s (load: %s)\n", n, window, drivertest.Load())
	fmt.Printf("%-22s  %-12s  %-8s  %s\n", "healthcheck", "cpu (%core)", "target", "ratio")
	for _, r := range rows {
		h := "none"
		if r.health != "" {
			h = "every " + r.health
		}
		fmt.Printf("%-22s  %-12.3f  %-8s  %.2f\n", h, 100*r.cpu, "1 %", r.cpu/target)
		b.ReportMetric(100*r.cpu, "idle-cpu-%-health-"+map[bool]string{true: "none", false: r.health}[r.health == ""])
	}
	b.ReportMetric(0, "ns/op")
}

func idleCPU(b *testing.B, n int, health string, window time.Duration) float64 {
	t, err := New(Options{Sweep: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = t.Stop() }()
	if _, err := t.Apply("idle", idleStack(n, health)); err != nil {
		b.Fatal(err)
	}
	if !t.WaitFor(5*time.Minute, func() bool { return t.Converged("idle") && serving(t) == n }) {
		b.Fatalf("not converged: %d of %d serving", serving(t), n)
	}
	time.Sleep(20 * time.Second) // past the rollout's monitor and the first sweeps
	if f := os.Getenv("ENGENHO_BENCH_PROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		_ = pprof.StartCPUProfile(out)
		defer pprof.StopCPUProfile()
	}
	writeAllocs := func(suffix string) {
		if f := os.Getenv("ENGENHO_BENCH_ALLOCS"); f != "" {
			out, err := os.Create(f + suffix)
			if err == nil {
				_ = pprof.Lookup("allocs").WriteTo(out, 0)
				out.Close()
			}
		}
	}
	writeAllocs(".before")
	before, at := cpuTime(), time.Now()
	time.Sleep(window)
	cpu := (cpuTime() - before).Seconds() / time.Since(at).Seconds()
	writeAllocs(".after")
	return cpu
}

func serving(t *Tree) int {
	c := 0
	for _, s := range t.Board.Services("idle") {
		for _, r := range s.Replicas {
			if r.Phase == "serving" {
				c++
			}
		}
	}
	return c
}

// healthCases are the healthcheck intervals measured: none and 30s, or
// ENGENHO_BENCH_HEALTH (none or an interval) alone.
func healthCases() []string {
	switch v := os.Getenv("ENGENHO_BENCH_HEALTH"); v {
	case "":
		return []string{"", "30s"}
	case "none":
		return []string{""}
	default:
		return []string{v}
	}
}
