package daemon_test

import (
	"fmt"
	"testing"

	"github.com/engenho/engenho/drivers/drivertest"
)

// BenchmarkPERF1RestartLatency measures PERF-1 through a real daemon (the
// engenho binary, its journal, its cgroups), in one run with the floor
// (drivertest.Perf1): SIGKILL of a replica's run of the static marker
// program → its replacement's first instruction, the arms killed in turn:
//   - floor: a C fork+exec loop (fork, execv, waitpid), the machine's floor;
//   - floor-go: the same loop in Go (ForkExec, wait4), in this process;
//   - daemon: a service with no port whose ladder restarts at once: its
//     process driver restarts the run itself, as the replica authorized;
//   - daemon-port: the same with a published port: the restart waits for
//     the service to withdraw the replica from the balancer (SVC-30).
//
// It prints p50/p90/p99, the ratios to the floor and the load.
func BenchmarkPERF1RestartLatency(b *testing.B) {
	p := drivertest.NewPerf1(b)
	n := newNode(b)
	n.start("running")

	arms, floor := p.Floors()
	fast, port := p.Argv("daemon"), p.Argv("daemon-port")
	stack := fmt.Sprintf(`name: perf
services:
  fast:
    command: [%q, %q, %q]
    x-engenho:
      backoff: {immediate: 100000000}
  port:
    command: [%q, %q, %q]
    ports: ["%d:80"]
    x-engenho:
      backoff: {immediate: 100000000}
`, fast[0], fast[1], fast[2], port[0], port[1], port[2], freePort(b))
	arms = append(arms, p.Arm("daemon"), p.Arm("daemon-port"))
	n.mustCLI("apply", n.writeFile("perf.yaml", stack))
	p.Measure(b, floor, "through the engenho daemon", arms...)
	n.mustCLI("remove", "perf")
}
