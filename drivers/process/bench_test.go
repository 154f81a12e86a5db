package process_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/process"
)

// BenchmarkRestartLatency measures PERF-1's path for the process driver:
// SIGKILL a running instance; its Watch callback calls Start. Two spans
// from the kill, p50 and p99 of each:
//   - exec: until the replacement's execve has succeeded, i.e. its first
//     instruction is next. Start stamps StartedAt right after ForkExec
//     returns, and ForkExec returns only once the child's execve worked.
//   - start: until Start has returned (the run also recorded on disk).
//   - notify: until the Watch callback began (the kernel's exit, the
//     reaper and the hand-off; the rest of exec is spawning).
//
// It runs with the instance in its cgroup (DRV-12: on cgroup v1 the fork
// happens on a thread that joined the cgroup first) and without, so the
// cgroup's share of the restart path shows side by side.
func BenchmarkRestartLatency(b *testing.B) {
	b.Run("cgroup", func(b *testing.B) { restartLatency(b, newDriver(b, b.TempDir())) })
	b.Run("no-cgroup", func(b *testing.B) {
		d, err := process.New(process.Options{Dir: b.TempDir(), NoCgroups: true, Logger: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		restartLatency(b, d)
	})
}

func restartLatency(b *testing.B, d *process.Driver) {
	defer d.Close()
	ctx := context.Background()
	if err := d.Create(ctx, drivers.Spec{Name: "bench", Command: []string{"sleep", "3600"}}); err != nil {
		b.Fatal(err)
	}
	if err := d.Start(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	defer func() { d.Kill(ctx, "bench"); d.Delete(ctx, "bench") }()
	lat := make([]time.Duration, 0, b.N)
	execLat := make([]time.Duration, 0, b.N)
	restarted := make(chan [2]time.Time, 1)
	notifyLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		st, err := d.Inspect(ctx, "bench")
		if err != nil || st.State != drivers.StateRunning {
			b.Fatalf("Inspect: %+v %v", st, err)
		}
		stop, err := d.Watch("bench", func(drivers.Exit) {
			called := time.Now()
			if err := d.Start(ctx, "bench"); err != nil {
				b.Error(err)
			}
			restarted <- [2]time.Time{called, time.Now()}
		})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		unix.Kill(st.Pid, unix.SIGKILL)
		ts := <-restarted
		notifyLat = append(notifyLat, ts[0].Sub(t0))
		lat = append(lat, ts[1].Sub(t0))
		stop()
		next, err := d.Inspect(ctx, "bench")
		if err != nil || next.State != drivers.StateRunning {
			b.Fatalf("Inspect after restart: %+v %v", next, err)
		}
		execLat = append(execLat, next.StartedAt.Sub(t0))
	}
	b.StopTimer()
	report := func(ds []time.Duration, unit string) {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), unit+"-p50-µs")
		b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), unit+"-p99-µs")
	}
	report(execLat, "exec")
	report(lat, "start")
	report(notifyLat, "notify")
}
