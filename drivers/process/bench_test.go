package process_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/process"
)

// BenchmarkRestartLatency measures PERF-1's path for the process driver
// alone, in one run with the floor (drivertest.Perf1): SIGKILL of a run
// of the static marker program → its replacement's first instruction,
// the arms killed in turn:
//   - floor, floor-go: fork+exec loops in C and in Go (the floor);
//   - floor-os: the Go loop through os.StartProcess and Process.Wait (what
//     os/exec uses), against floor-go's syscall.ForkExec and wait4;
//   - watch-start: the run's Watch callback calls Start, as a supervisor
//     that decides after the exit does;
//   - at-once: the run's watch authorized a restart at once
//     (WatchRestart), so the driver restarts it from the exit handling;
//
// each in a cgroup of its own (DRV-12: on cgroup v1 the fork happens on a
// thread that joined the cgroup first) and, with the suffix -nocg, on a
// driver without cgroups, so the cgroup's share shows side by side.
func BenchmarkRestartLatency(b *testing.B) {
	p := drivertest.NewPerf1(b)
	root := drivertest.CgroupRoot("perf1")
	b.Cleanup(func() { drivertest.CleanCgroups(root) })
	withCg, err := process.New(process.Options{Dir: filepath.Join(p.Dir, "cg"), CgroupRoot: root, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer withCg.Close()
	noCg, err := process.New(process.Options{Dir: filepath.Join(p.Dir, "nocg"), NoCgroups: true, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer noCg.Close()

	arms, floor := p.Floors()
	arms = append(arms, p.FloorOS("floor-os"))
	for _, c := range []struct {
		suffix string
		d      *process.Driver
	}{{"", withCg}, {"-nocg", noCg}} {
		for _, atOnce := range []bool{false, true} {
			name := "watch-start" + c.suffix
			if atOnce {
				name = "at-once" + c.suffix
			}
			arms = append(arms, p.Arm(name))
			defer keepRestarting(b, c.d, name, p.Argv(name), atOnce)()
		}
	}
	p.Measure(b, floor, "the process driver alone", arms...)
}

// keepRestarting runs argv as instance name on d and has every run
// restarted when it ends: by Start from its Watch callback, or (atOnce)
// by the driver itself, the callback arming the next run's WatchRestart.
// The returned func stops it.
func keepRestarting(b *testing.B, d *process.Driver, name string, argv []string, atOnce bool) func() {
	ctx := context.Background()
	if err := d.Create(ctx, drivers.Spec{Name: name, Command: argv}); err != nil {
		b.Fatal(err)
	}
	stopped := make(chan struct{})
	var watch func()
	watch = func() {
		fn := func(e drivers.Exit) {
			select {
			case <-stopped:
				return
			default:
			}
			if !atOnce || !e.Restarted {
				if err := d.Start(ctx, name); err != nil {
					b.Error(err)
					return
				}
			}
			watch()
		}
		var err error
		if atOnce {
			_, err = d.WatchRestart(name, drivers.RestartPolicy{}, fn)
		} else {
			_, err = d.Watch(name, fn)
		}
		if err != nil {
			b.Error(err)
		}
	}
	if err := d.Start(ctx, name); err != nil {
		b.Fatal(err)
	}
	watch()
	return func() {
		close(stopped)
		d.Kill(ctx, name)
		d.Delete(ctx, name)
	}
}
