package fake_test

import (
	"context"
	"io"
	"testing"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/fake"
)

func shSpec(name, script string, labels drivers.Labels) drivers.Spec {
	return drivers.Spec{Name: name, Labels: labels, Command: []string{"sh", "-c", script}}
}

// DRV-2, DRV-11: the fake passes the same conformance suite as the real
// drivers; its program reader interprets the suite's scripts. The suite
// waits in real time, so this run uses the wall clock.
func TestConformance(t *testing.T) {
	d := fake.New(fake.Options{Clock: clock.New(), Seed: 1})
	drivertest.Run(t, drivertest.Harness{Driver: d, Spec: shSpec})
}

// lacking wraps the fake as a backend with no Watch, Exec or Logs, to prove
// the suite checks ErrUnsupported for the features a harness lists.
type lacking struct{ *fake.Driver }

func (lacking) Watch(name string, fn func(drivers.Exit)) (func(), error) {
	return nil, drivers.Errorf("lacking", "watch", name, drivers.ErrUnsupported, "")
}

func (lacking) Exec(_ context.Context, name string, _ []string) (drivers.ExecResult, error) {
	return drivers.ExecResult{}, drivers.Errorf("lacking", "exec", name, drivers.ErrUnsupported, "")
}

func (lacking) Logs(_ context.Context, name string, _ drivers.LogOptions) (io.ReadCloser, error) {
	return nil, drivers.Errorf("lacking", "logs", name, drivers.ErrUnsupported, "")
}

// DRV-2: a harness that lacks optional features still runs the suite.
func TestConformanceLackingFeatures(t *testing.T) {
	d := lacking{fake.New(fake.Options{Clock: clock.New(), Seed: 2})}
	drivertest.Run(t, drivertest.Harness{
		Driver: d,
		Spec:   shSpec,
		Lacks:  []drivertest.Feature{drivertest.FeatureWatch, drivertest.FeatureExec, drivertest.FeatureLogs, drivertest.FeatureFollow},
	})
}
