package treetest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/process"
	"github.com/engenho/engenho/messages"
)

// exitLog is the process driver with every exit its watches report kept
// in order.
type exitLog struct {
	*process.Driver
	mu    sync.Mutex
	exits []drivers.Exit
}

func (d *exitLog) record(fn func(drivers.Exit)) func(drivers.Exit) {
	return func(e drivers.Exit) {
		d.mu.Lock()
		d.exits = append(d.exits, e)
		d.mu.Unlock()
		fn(e)
	}
}

func (d *exitLog) Watch(name string, fn func(drivers.Exit)) (func(), error) {
	return d.Driver.Watch(name, d.record(fn))
}

func (d *exitLog) WatchRestart(name string, p drivers.RestartPolicy, fn func(drivers.Exit)) (func(), error) {
	return d.Driver.WatchRestart(name, p, d.record(fn))
}

// seen reports the exits with a signal (the kills) and how many of them
// the driver restarted.
func (d *exitLog) seen() (kills, restarted int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.exits {
		if e.Signal != "" {
			kills++
			if e.Restarted {
				restarted++
			}
		}
	}
	return kills, restarted
}

// PERF-1, SUP-10, SUP-18: through the whole tree on the process driver,
// a replica of a service with no port whose ladder restarts the first 3
// failures at once has them restarted by the driver itself (the watch
// says Restarted), each one charged and counted as before: replica.failed
// and replica.restarted, RESTARTS and the ledger's failures. The 4th
// failure waits the ladder's 1m, as always: the driver was not
// authorized to restart it and it stays down.
func TestPERF1RestartAtOnceThroughTheTree(t *testing.T) {
	if os.Geteuid() != 0 {
		drivertest.Need(t, "cgroups", false, "the daemon runs replicas in cgroups as root; this test does too")
	}
	dir := t.TempDir()
	root := drivertest.CgroupRoot("treetest")
	t.Cleanup(func() { drivertest.CleanCgroups(root) })
	pd, err := process.New(process.Options{Dir: filepath.Join(dir, "data"), CgroupRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	drv := &exitLog{Driver: pd}
	tree, err := New(Options{Driver: drv})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tree.Stop() }()
	ctx := context.Background()
	defer func() {
		st, _ := pd.List(ctx, drivers.Labels{drivers.LabelStack: "fast"})
		for _, s := range st {
			pd.Kill(ctx, s.Name)
			pd.Delete(ctx, s.Name)
		}
	}()
	if _, err := tree.Apply("fast", "services:\n  a:\n    command: [\"/bin/sleep\", \"3600\"]\n    x-engenho:\n      backoff: {immediate: 3}\n"); err != nil {
		t.Fatal(err)
	}
	replica := func() messages.ReplicaStatus {
		if rs := tree.Service("fast", "a").Replicas; len(rs) == 1 {
			return rs[0]
		}
		return messages.ReplicaStatus{}
	}
	instance := func() drivers.Status {
		st, _ := pd.Inspect(ctx, replica().Instance)
		return st
	}
	if !tree.WaitFor(time.Minute, func() bool { return tree.Converged("fast") && instance().Pid > 0 }) {
		t.Fatalf("not serving:\n%s", tree.Events)
	}
	for i := 1; i <= 3; i++ {
		pid := instance().Pid
		unix.Kill(pid, unix.SIGKILL)
		if !tree.WaitFor(time.Minute, func() bool {
			r, st := replica(), instance()
			return r.Restarts == i && r.Phase == "serving" && st.Pid > 0 && st.Pid != pid
		}) {
			t.Fatalf("kill %d: %+v, instance %+v\n%s", i, replica(), instance(), tree.Events)
		}
		if kills, restarted := drv.seen(); kills != i || restarted != i {
			t.Fatalf("kill %d: the watches saw %d kills, %d restarted by the driver", i, kills, restarted)
		}
		if r := replica(); r.Ledger.Failures != i {
			t.Fatalf("kill %d: ledger %+v", i, r.Ledger)
		}
	}
	pid := instance().Pid
	unix.Kill(pid, unix.SIGKILL)
	if !tree.WaitFor(time.Minute, func() bool { r := replica(); return r.Phase == "down" && r.Ledger.Failures == 4 }) {
		t.Fatalf("4th kill: %+v\n%s", replica(), tree.Events)
	}
	r := replica()
	if wait := r.Ledger.NextAttempt.Sub(r.Ledger.LastFailure); wait != time.Minute || r.Restarts != 3 {
		t.Fatalf("4th kill: next attempt in %s, restarts %d: %+v", wait, r.Restarts, r)
	}
	if kills, restarted := drv.seen(); kills != 4 || restarted != 3 {
		t.Fatalf("the watches saw %d kills, %d restarted by the driver; want 4 and 3", kills, restarted)
	}
	if st := instance(); st.State != drivers.StateStopped {
		t.Fatalf("after the 4th kill the instance is %+v; it waits the ladder", st)
	}
	if f, rs := tree.Events.Count(messages.KindReplicaFailed), tree.Events.Count(messages.KindReplicaRestarted); f != 4 || rs != 3 {
		t.Fatalf("%d replica.failed, %d replica.restarted; want 4 and 3:\n%s", f, rs, tree.Events)
	}
}
