package treetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/process"
)

// BenchmarkRestartLatency measures PERF-1 in one run, four arms killed in
// turn (drivertest.Perf1): SIGKILL of a run of the static marker program
// → its replacement's first instruction, under
//   - floor: a C fork+exec loop (fork, execv, waitpid), the machine's floor;
//   - floor-go: the same loop in Go in this process (ForkExec, wait4);
//   - driver: the process driver alone, its Watch callback calling Start;
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
// their own when the machine allows (DRV-12), as in the daemon.
func BenchmarkRestartLatency(b *testing.B) {
	p := drivertest.NewPerf1(b)
	root := drivertest.CgroupRoot("perf1")
	b.Cleanup(func() { drivertest.CleanCgroups(root) })
	drv, err := process.New(process.Options{Dir: filepath.Join(p.Dir, "data"), CgroupRoot: root})
	if err != nil {
		b.Fatal(err)
	}
	defer drv.Close()

	var arms []*drivertest.Arm
	floor := "floor-go"
	if a := p.FloorC("floor"); a != nil {
		arms, floor = append(arms, a), "floor"
	}
	arms = append(arms, p.FloorGo("floor-go"))

	ctx := context.Background()
	driverArm := p.Arm("driver")
	stopDriver := restartOnExit(b, drv, "perf1-driver", p.Argv("driver"))
	defer stopDriver()
	arms = append(arms, driverArm)

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
	for _, a := range arms {
		a.WaitFirst(b, time.Minute)
	}

	run := p.Start(drivertest.Perf1Settle(), arms...)
	for b.Loop() {
		run.Round()
	}
	run.Print(os.Stdout, floor, fmt.Sprintf("marker %s; load %s", p.MarkerKind, drivertest.Load()))
	run.Report(b, floor)
}

// restartOnExit runs argv as instance name on drv and starts it again
// from its Watch callback each time it ends: the driver's share of the
// restart path with nothing above it. The returned func stops it.
func restartOnExit(b *testing.B, drv *process.Driver, name string, argv []string) func() {
	ctx := context.Background()
	if err := drv.Create(ctx, drivers.Spec{Name: name, Command: argv}); err != nil {
		b.Fatal(err)
	}
	stopped := make(chan struct{})
	var watch func()
	watch = func() {
		if _, err := drv.Watch(name, func(drivers.Exit) {
			select {
			case <-stopped:
				return
			default:
			}
			if err := drv.Start(ctx, name); err != nil {
				b.Error(err)
				return
			}
			watch()
		}); err != nil {
			b.Error(err)
		}
	}
	if err := drv.Start(ctx, name); err != nil {
		b.Fatal(err)
	}
	watch()
	return func() {
		close(stopped)
		drv.Kill(ctx, name)
		drv.Delete(ctx, name)
	}
}
