package treetest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/process"
)

// BenchmarkRestartLatency measures PERF-1 in one run, the arms killed in
// turn (drivertest.Perf1): SIGKILL of a run of the static marker program
// → its replacement's first instruction, under
//   - floor: a C fork+exec loop (fork, execv, waitpid), the machine's floor;
//   - floor-go: the same loop in Go in this process (ForkExec, wait4);
//   - tree: the whole supervision tree (stack, service and replica actors)
//     on the process driver, a service with no port whose ladder restarts
//     at once: the driver restarts the run itself, as the replica
//     authorized (drivers.RestartWatcher);
//   - tree-port: the same with a published port (the tree's in-memory
//     balancer): the replica restarts the run once the service has
//     withdrawn it from the balancer (SVC-30).
//
// It prints the p50/p90/p99 table and each arm's ratio to the floor
// (target: tree p50 ≤ 1.2x, p99 ≤ 1.5x). The instances run in cgroups of
// their own when the machine allows (DRV-12), as in the daemon. The
// process driver's own share is BenchmarkRestartLatency in
// drivers/process; the whole daemon's, in runtime/daemon.
func BenchmarkRestartLatency(b *testing.B) {
	p := drivertest.NewPerf1(b)
	root := drivertest.CgroupRoot("perf1")
	b.Cleanup(func() { drivertest.CleanCgroups(root) })
	drv, err := process.New(process.Options{Dir: filepath.Join(p.Dir, "data"), CgroupRoot: root})
	if err != nil {
		b.Fatal(err)
	}
	defer drv.Close()

	arms, floor := p.Floors()

	ctx := context.Background()
	t, err := New(Options{Driver: drv})
	if err != nil {
		b.Fatal(err)
	}
	fast, port := p.Argv("tree"), p.Argv("tree-port")
	stack := fmt.Sprintf(`services:
  a:
    command: [%q, %q, %q]
    x-engenho:
      backoff: {immediate: 100000000}
  b:
    command: [%q, %q, %q]
    ports: ["18080:80"]
    x-engenho:
      backoff: {immediate: 100000000}
`, fast[0], fast[1], fast[2], port[0], port[1], port[2])
	arms = append(arms, p.Arm("tree"), p.Arm("tree-port"))
	if _, err := t.Apply("perf", stack); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = t.Stop() // actors only: the workload is stopped below
		if st, err := drv.List(ctx, drivers.Labels{drivers.LabelStack: "perf"}); err == nil {
			for _, s := range st {
				drv.Kill(ctx, s.Name)
				drv.Delete(ctx, s.Name)
			}
		}
	}()
	p.Measure(b, floor, "", arms...)
}
