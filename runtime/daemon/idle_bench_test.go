package daemon_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers/drivertest"
)

// BenchmarkPERF3IdleDaemon measures PERF-3's idle daemon: a real daemon
// (process driver, the config's defaults: sweep 10s, usage sampling 5s)
// with no stacks, then the same daemon with 100 idle process replicas
// (sleep, no healthcheck), each settled (20s) and then measured over
// ENGENHO_BENCH_WINDOW (default 60s): its CPU from /proc/PID/stat
// (utime+stime, in 10ms ticks) and from its process CPU clock (ns), and
// its voluntary and involuntary context switches (its wake-ups). Target:
// 0.1% of one core in both cases. It prints a table with the figure, the
// target and the ratio, and the machine's load; it asserts nothing.
// Run: go test -run '^$' -bench PERF3IdleDaemon -benchtime 1x -timeout 30m ./runtime/daemon/
func BenchmarkPERF3IdleDaemon(b *testing.B) {
	window := 60 * time.Second
	if v, err := time.ParseDuration(os.Getenv("ENGENHO_BENCH_WINDOW")); err == nil {
		window = v
	}
	const target = 0.001 // of one core
	var rows []idleRow
	for i := 0; i < b.N; i++ {
		n := newNode(b)
		n.sweep = "10s" // the default
		n.writeConfig()
		n.start("running")
		time.Sleep(20 * time.Second) // past the boot, the first compaction and the first rounds
		rows = append(rows, measureIdle(b, n.cmd.Process.Pid, "no stacks", window))

		const replicas = 100
		var st strings.Builder
		st.WriteString("name: idle\nservices:\n")
		fmt.Fprintf(&st, "  s:\n    command: [\"/bin/sleep\", \"1000000\"]\n    stop_grace_period: 1s\n    deploy: {replicas: %d}\n", replicas)
		n.mustCLI("apply", n.writeFile("idle.yaml", st.String()))
		n.eventually("replicas serving", 10*time.Minute, func() bool { return serving(n) == replicas })
		time.Sleep(20 * time.Second) // past the rollout's monitor and the logs' first quiet checks
		rows = append(rows, measureIdle(b, n.cmd.Process.Pid, fmt.Sprintf("%d idle process replicas", replicas), window))
		n.mustCLI("remove", "idle")
		n.eventually("removed", 10*time.Minute, func() bool { return serving(n) == 0 })
		n.stop()
	}
	fmt.Printf("\nPERF-3 idle daemon: its own CPU over %s, process driver, default config (load: %s)\n", window, drivertest.Load())
	fmt.Printf("%-28s  %-16s  %-17s  %-11s  %-8s  %s\n", "daemon", "cpu %core (stat)", "cpu %core (clock)", "wake-ups/s", "target", "ratio (clock)")
	for _, r := range rows {
		fmt.Printf("%-28s  %-16.3f  %-17.4f  %-11.1f  %-8s  %.2f\n", r.what, 100*r.stat, 100*r.clk, r.switches, "0.1 %", r.clk/target)
		key := strings.Fields(r.what)[0]
		b.ReportMetric(100*r.clk, "cpu%-"+key)
	}
	b.ReportMetric(0, "ns/op")
}

// idleRow is one measured case: CPU as a share of one core, context
// switches a second.
type idleRow struct {
	what      string
	stat, clk float64
	switches  float64
}

func measureIdle(b *testing.B, pid int, what string, window time.Duration) idleRow {
	s0, c0, w0, t0 := procCPU(b, pid), processClock(b, pid), contextSwitches(pid), time.Now()
	time.Sleep(window)
	s1, c1, w1, t1 := procCPU(b, pid), processClock(b, pid), contextSwitches(pid), time.Now()
	d := t1.Sub(t0)
	return idleRow{what: what, stat: float64(s1-s0) / float64(d), clk: float64(c1-c0) / float64(d),
		switches: float64(w1-w0) / d.Seconds()}
}

// processClock is pid's CPU time from its process CPU clock (all its
// threads, those that ended included), in nanoseconds: the clock id of
// another process is ((^pid) << 3) | CPUCLOCK_SCHED (2).
func processClock(b testing.TB, pid int) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32((^pid)<<3|2), &ts); err != nil {
		b.Fatalf("process clock of %d: %v", pid, err)
	}
	return time.Duration(ts.Nano())
}

// contextSwitches sums the voluntary and involuntary context switches of
// pid's threads now (threads that ended are not counted).
func contextSwitches(pid int) int64 {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var n int64
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && (f[0] == "voluntary_ctxt_switches:" || f[0] == "nonvoluntary_ctxt_switches:") {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				n += v
			}
		}
	}
	return n
}
