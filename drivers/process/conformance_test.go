package process_test

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/process"
)

func shSpec(name, script string, labels drivers.Labels) drivers.Spec {
	return drivers.Spec{Name: name, Labels: labels, Command: []string{"sh", "-c", script}}
}

func newDriver(t testing.TB, dir string) *process.Driver {
	t.Helper()
	return openDriver(t, dir, cgroupRoot)
}

// newDriverIn is a driver under a cgroup root of its own, removed when the
// test ends (after the driver's own cleanups, which run first).
func newDriverIn(t testing.TB, dir, root string) *process.Driver {
	t.Helper()
	t.Cleanup(func() {
		if left, err := drivertest.CleanCgroups(root); err != nil {
			t.Errorf("cgroup root %s: %v (left %v)", root, err, left)
		}
	})
	return openDriver(t, dir, root)
}

func openDriver(t testing.TB, dir, root string) *process.Driver {
	t.Helper()
	d, err := process.New(process.Options{Dir: dir, CgroupRoot: root, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

// DRV-2, DRV-3: the process driver passes the conformance suite.
func TestConformance(t *testing.T) {
	d := newDriver(t, t.TempDir())
	defer d.Close()
	drivertest.Run(t, drivertest.Harness{Driver: d, Spec: shSpec})
}
