package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/drivertest"
)

// BenchmarkDaemonRestart measures PERF-4: the daemon running 5,000
// process replicas (ENGENHO_PERF4_REPLICAS, a multiple of 100, picks
// another count) is SIGKILLed and started again; the time from the new
// daemon's launch until every replica is adopted and reported serving, and
// how many workload restarts that caused (target: within 3s, 0 restarts).
// The replicas have no healthcheck, so serving is healthy (SVC-6). It
// prints the figures with their targets and asserts nothing.
func BenchmarkDaemonRestart(b *testing.B) {
	const per = 100
	total := 5_000
	if v := os.Getenv("ENGENHO_PERF4_REPLICAS"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < per || c%per != 0 {
			b.Fatalf("ENGENHO_PERF4_REPLICAS: %q is not a multiple of %d", v, per)
		}
		total = c
	}
	services := total / per
	n := newNode(b)
	n.start("running")
	var st strings.Builder
	st.WriteString("name: many\nservices:\n")
	for i := 0; i < services; i++ {
		fmt.Fprintf(&st, "  s%d:\n    command: [\"/bin/sleep\", \"1000000\"]\n    stop_grace_period: 1s\n    deploy: {replicas: %d}\n", i, per)
	}
	n.mustCLI("apply", n.writeFile("many.yaml", st.String()))
	n.eventually(fmt.Sprintf("%d replicas serving", total), 10*time.Minute, func() bool { return serving(n) == total })
	before := startTimes(n)
	for i := 0; i < b.N; i++ {
		n.kill()
		start := time.Now()
		n.start("running")
		n.eventually("all adopted", 5*time.Minute, func() bool { return serving(n) == total })
		took := time.Since(start)
		restarted := 0
		for inst, at := range startTimes(n) {
			if !before[inst].Equal(at) {
				restarted++
			}
		}
		b.ReportMetric(took.Seconds(), "adopt-s")
		b.ReportMetric(float64(restarted), "restarts")
		b.ReportMetric(0, "ns/op")
		const target = 3 * time.Second
		fmt.Printf("\nPERF-4 daemon SIGKILL with %d process replicas: all adopted and serving %.2fs, target %s (ratio %.2f): %s; workload restarts %d, target 0: %s (load: %s)\n",
			total, took.Seconds(), target, took.Seconds()/target.Seconds(), verdict(took <= target), restarted, verdict(restarted == 0), drivertest.Load())
	}
	n.mustCLI("remove", "many")
	n.eventually("removed", 5*time.Minute, func() bool { return serving(n) == 0 })
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

func serving(n *node) int {
	st, err := n.status()
	if err != nil {
		return -1
	}
	c := 0
	for _, s := range st.Services {
		for _, r := range s.Replicas {
			if r.Phase == "serving" {
				c++
			}
		}
	}
	return c
}

func startTimes(n *node) map[string]time.Time {
	out := map[string]time.Time{}
	st, _ := n.status()
	for _, s := range st.Services {
		for k, v := range instances(s) {
			out[k] = v
		}
	}
	return out
}

// BenchmarkREL5HeldOnCorruptJournal measures a daemon held on a damaged
// journal (REL-5): the time from its launch on a journal with a zeroed
// table footer to failed/hold (held-ms), then its descriptors and resident
// memory before and after 100 and 500 more failed boots (operator
// retries), each of which checks the journal in a child process. Flat is
// the target: an in-process badger.Open that fails leaks 2 descriptors and
// a memtable each time. Run: go test -run '^$' -bench REL5Held
// -benchtime 3x ./runtime/daemon/
func BenchmarkREL5HeldOnCorruptJournal(b *testing.B) {
	for i := 0; i < b.N; i++ {
		n := newNode(b)
		n.writeConfig(n.writeFile("listed.yaml", idleStackB("listed")))
		n.start("running")
		if code := n.stop(); code != 0 {
			b.Fatalf("exit %d", code)
		}
		tables, _ := filepath.Glob(filepath.Join(n.data(), "journal", "*.sst"))
		if len(tables) == 0 {
			b.Fatal("no table to damage")
		}
		fi, _ := os.Stat(tables[0])
		f, _ := os.OpenFile(tables[0], os.O_WRONLY, 0)
		_, _ = f.WriteAt(make([]byte, 64), fi.Size()-64)
		f.Close()

		start := time.Now()
		n.start("failed")
		held := time.Since(start)
		c, err := n.client()
		if err != nil {
			b.Fatal(err)
		}
		pid := n.cmd.Process.Pid
		retryHeld(b, c, 0) // the connection is accepted and in use
		fd0, rss0 := settledFDs(b, pid), procRSS(b, pid)
		for r := range 100 {
			retryHeld(b, c, r)
		}
		fd1, rss1 := settledFDs(b, pid), procRSS(b, pid)
		for r := range 400 {
			retryHeld(b, c, r)
		}
		fd2, rss2 := settledFDs(b, pid), procRSS(b, pid)
		c.Close()
		b.ReportMetric(float64(held.Milliseconds()), "held-ms")
		b.ReportMetric(float64(fd0), "fds-before")
		b.ReportMetric(float64(fd1), "fds-after-100")
		b.ReportMetric(float64(fd2), "fds-after-500")
		b.ReportMetric(float64(rss0)/1024, "rss-MiB-before")
		b.ReportMetric(float64(rss1)/1024, "rss-MiB-after-100")
		b.ReportMetric(float64(rss2)/1024, "rss-MiB-after-500")
		b.ReportMetric(0, "ns/op")
		n.kill()
	}
}

func idleStackB(name string) string {
	return "name: " + name + "\nservices:\n  a:\n    command: [\"/bin/sleep\", \"100000\"]\n    stop_grace_period: 1s\n"
}

// procRSS is a process's resident set in KiB.
func procRSS(b testing.TB, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	return 0
}

// BenchmarkDRV16UsageSampling measures what the usage sampling (DRV-16)
// costs the daemon: its own CPU time (from /proc/PID/stat) over an idle
// window with 100 and 1,000 process replicas running, with sampling on
// (usage.interval 5s, the default) and off, and its resident set. The
// target: below 1% of a core with 100 replicas. It prints a table.
func BenchmarkDRV16UsageSampling(b *testing.B) {
	window := 30 * time.Second
	if v, err := time.ParseDuration(os.Getenv("ENGENHO_BENCH_WINDOW")); err == nil {
		window = v
	}
	type row struct {
		replicas int
		sampling string
		cpu      float64 // share of one core
		rssMiB   float64
	}
	var rows []row
	for _, replicas := range []int{100, 1000} {
		n := newNode(b)
		n.start("running")
		var st strings.Builder
		st.WriteString("name: idle\nservices:\n")
		for i := 0; i < replicas/100; i++ {
			fmt.Fprintf(&st, "  s%d:\n    command: [\"/bin/sleep\", \"1000000\"]\n    stop_grace_period: 1s\n    deploy: {replicas: 100}\n", i)
		}
		n.mustCLI("apply", n.writeFile("idle.yaml", st.String()))
		n.eventually("replicas serving", 10*time.Minute, func() bool { return serving(n) == replicas })
		// Both measured on a daemon that adopted the replicas, so neither
		// carries the rollout's after-effects.
		for _, interval := range []string{"0s", "5s"} {
			n.kill() // the replicas live on; the next daemon adopts them
			n.extra = "usage: {interval: " + interval + "}\n"
			n.writeConfig()
			n.start("running")
			n.eventually("replicas adopted", 10*time.Minute, func() bool { return serving(n) == replicas })
			time.Sleep(10 * time.Second) // past boot and the first rounds
			pid := n.cmd.Process.Pid
			c0, t0 := procCPU(b, pid), time.Now()
			time.Sleep(window)
			c1, t1 := procCPU(b, pid), time.Now()
			sampling := "on (5s)"
			if interval == "0s" {
				sampling = "off"
			}
			rows = append(rows, row{replicas, sampling, float64(c1-c0) / float64(t1.Sub(t0)), float64(procRSS(b, pid)) / 1024})
		}
		n.mustCLI("remove", "idle")
		n.eventually("removed", 10*time.Minute, func() bool { return serving(n) == 0 })
		n.stop()
	}
	fmt.Printf("\nDRV-16 usage sampling: the daemon's own cost over %s idle (process replicas, cgroup v1)\n", window)
	fmt.Printf("%-9s  %-9s  %-12s  %s\n", "replicas", "sampling", "cpu (%core)", "rss (MiB)")
	for _, r := range rows {
		fmt.Printf("%-9d  %-9s  %-12.3f  %.1f\n", r.replicas, r.sampling, 100*r.cpu, r.rssMiB)
		b.ReportMetric(100*r.cpu, fmt.Sprintf("cpu%%-%d-%s", r.replicas, strings.Fields(r.sampling)[0]))
	}
	b.ReportMetric(0, "ns/op")
}

// procCPU is a process's user+system CPU time (/proc/PID/stat, in
// USER_HZ ticks of 10ms).
func procCPU(b testing.TB, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
