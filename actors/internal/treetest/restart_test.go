package treetest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/process"
)

// announce is the PERF-1 workload: a static C program whose first act is
// to connect to a unix socket and send its pid, so the harness sees the
// replacement's first instructions, not a later probe.
const announce = `#include <sys/socket.h>
#include <sys/un.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
	strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) { char b[32]; int n = snprintf(b, sizeof b, "%d\n", getpid()); write(fd, b, n); }
	for (;;) pause();
}
`

// BenchmarkRestartLatency measures PERF-1 through the whole tree on the
// process driver: a replica's process is SIGKILLed under a policy that
// restarts at once; the time is from the kill to the replacement's first
// instructions (its connect to the harness socket). Target p50 ≤ 2 ms,
// p99 ≤ 10 ms; the floor is fork+exec of a static binary (~0.5 ms).
func BenchmarkRestartLatency(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "announce")
	src := bin + ".c"
	if err := os.WriteFile(src, []byte(announce), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-static", "-o", bin, src).CombinedOutput(); err != nil {
		b.Skipf("SKIP no static C toolchain for the PERF-1 workload: %v: %s", err, out)
	}
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	pids := make(chan int, 16)
	go acceptPids(l, pids)
	drv, err := process.New(process.Options{Dir: filepath.Join(dir, "data")})
	if err != nil {
		b.Fatal(err)
	}
	defer drv.Close()
	t, err := New(Options{Driver: drv})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = t.Stop() }()
	stack := fmt.Sprintf(`services:
  a:
    command: [%q, %q]
    x-engenho:
      backoff: {immediate: 100000000}
`, bin, sock)
	if _, err := t.Apply("perf", stack); err != nil {
		b.Fatal(err)
	}
	pid := <-pids
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		select {
		case pid = <-pids:
			lat = append(lat, time.Since(start))
		case <-time.After(10 * time.Second):
			b.Fatalf("no replacement after kill %d", i)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

func acceptPids(l net.Listener, pids chan<- int) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		var pid int
		_, _ = fmt.Fscan(c, &pid)
		c.Close()
		pids <- pid
	}
}
