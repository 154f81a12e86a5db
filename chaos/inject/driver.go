package inject

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers"
)

// Driver wraps a drivers.Driver with the registry's faults. Watch passes
// through untouched unless a plant hides exits.
type Driver struct {
	inner  drivers.Driver
	faults *Faults
	forget *forgetter // PlantForgetAdopt, else nil
	hide   *hider     // PlantHideExit, else nil
}

var _ drivers.Driver = (*Driver)(nil)

// WrapDriver returns d seen through f's faults.
func WrapDriver(d drivers.Driver, f *Faults) *Driver {
	w := &Driver{inner: d, faults: f}
	switch f.Plant().Kind() {
	case PlantForgetAdopt:
		w.forget = &forgetter{plant: f.Plant(), boot: f.clk.Now(), hidden: map[string]bool{}}
	case PlantHideExit:
		w.hide = &hider{plant: f.Plant(), last: map[string]drivers.Status{}}
	}
	return w
}

// hider is PlantHideExit: for a covered instance it remembers the last
// running status and reports it again once the run has ended.
type hider struct {
	plant Plant
	mu    sync.Mutex
	last  map[string]drivers.Status
}

// see returns what the daemon is told of st.
func (h *hider) see(st drivers.Status) drivers.Status {
	if !h.plant.Covers(st.Name) {
		return st
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if st.State == drivers.StateRunning {
		h.last[st.Name] = st
		return st
	}
	if prev, ok := h.last[st.Name]; ok {
		return prev
	}
	return st
}

// forgetter is PlantForgetAdopt: a covered instance that was running when
// the daemon wrapped its driver (its run started no later) stays hidden for
// the daemon's life. It decides when it first sees an instance rather than
// listing every instance at the wrap: on a busy incusd that list took
// seconds and held up the very boot the self-test watches.
type forgetter struct {
	plant  Plant
	boot   time.Time
	mu     sync.Mutex
	hidden map[string]bool
}

// hides reports whether st is one the daemon must not see.
func (f *forgetter) hides(st drivers.Status) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.hidden[st.Name] && st.State == drivers.StateRunning && f.plant.Covers(st.Name) && !st.StartedAt.After(f.boot) {
		f.hidden[st.Name] = true
	}
	return f.hidden[st.Name]
}

// Unwrap returns the driver under d when d is a chaos wrapper, else d.
func Unwrap(d drivers.Driver) drivers.Driver {
	if w, ok := d.(*Driver); ok {
		return w.inner
	}
	return d
}

func (w *Driver) hit(ctx context.Context, op, name string) error {
	return w.faults.hit(ctx, LayerDriver, w.inner.Name(), op, name, false, func(kind, cause error) error {
		return drivers.Wrap(w.inner.Name(), op, name, kind, cause)
	})
}

func (w *Driver) Name() string { return w.inner.Name() }

func (w *Driver) Validate(ctx context.Context, spec drivers.Spec) error {
	if err := w.hit(ctx, "validate", spec.Name); err != nil {
		return err
	}
	return w.inner.Validate(ctx, spec)
}

func (w *Driver) Create(ctx context.Context, spec drivers.Spec) error {
	if err := w.hit(ctx, "create", spec.Name); err != nil {
		return err
	}
	return w.inner.Create(ctx, spec)
}

func (w *Driver) Start(ctx context.Context, name string) error {
	if err := w.hit(ctx, "start", name); err != nil {
		return err
	}
	return w.inner.Start(ctx, name)
}

func (w *Driver) Stop(ctx context.Context, name string, grace time.Duration) error {
	if err := w.hit(ctx, "stop", name); err != nil {
		return err
	}
	if p := w.faults.Plant(); p.Kind() == PlantStopNoop && p.Covers(name) {
		return nil
	}
	return w.inner.Stop(ctx, name, grace)
}

func (w *Driver) Kill(ctx context.Context, name string) error {
	if err := w.hit(ctx, "kill", name); err != nil {
		return err
	}
	return w.inner.Kill(ctx, name)
}

func (w *Driver) Delete(ctx context.Context, name string) error {
	if err := w.hit(ctx, "delete", name); err != nil {
		return err
	}
	return w.inner.Delete(ctx, name)
}

func (w *Driver) Inspect(ctx context.Context, name string) (drivers.Status, error) {
	if err := w.hit(ctx, "inspect", name); err != nil {
		return drivers.Status{}, err
	}
	st, err := w.inner.Inspect(ctx, name)
	if err == nil && w.forget != nil && w.forget.hides(st) {
		return drivers.Status{}, drivers.Errorf(w.inner.Name(), "inspect", name, drivers.ErrNotFound, "")
	}
	if err == nil && w.hide != nil {
		st = w.hide.see(st)
	}
	return st, err
}

func (w *Driver) Exec(ctx context.Context, name string, argv []string) (drivers.ExecResult, error) {
	if err := w.hit(ctx, "exec", name); err != nil {
		return drivers.ExecResult{}, err
	}
	return w.inner.Exec(ctx, name, argv)
}

func (w *Driver) Logs(ctx context.Context, name string, opts drivers.LogOptions) (io.ReadCloser, error) {
	if err := w.hit(ctx, "logs", name); err != nil {
		return nil, err
	}
	return w.inner.Logs(ctx, name, opts)
}

func (w *Driver) List(ctx context.Context, selector drivers.Labels) ([]drivers.Status, error) {
	if err := w.hit(ctx, "list", ""); err != nil {
		return nil, err
	}
	all, err := w.inner.List(ctx, selector)
	if err != nil || w.forget == nil && w.hide == nil {
		return all, err
	}
	seen := all[:0:0]
	for _, st := range all {
		switch {
		case w.forget != nil && w.forget.hides(st):
		case w.hide != nil:
			seen = append(seen, w.hide.see(st))
		default:
			seen = append(seen, st)
		}
	}
	return seen, nil
}

func (w *Driver) Watch(name string, fn func(drivers.Exit)) (func(), error) {
	if w.hide != nil && w.hide.plant.Covers(name) {
		fn = func(drivers.Exit) {} // the end of the run is never told
	}
	return w.inner.Watch(name, fn)
}

// Usage passes through untouched: the sampler reads it on its own timer
// and a fault there would only blank a status column.
func (w *Driver) Usage(ctx context.Context, name string) (drivers.Usage, error) {
	return w.inner.Usage(ctx, name)
}

// Instance is one instance as the chaos op "instances" reports it: the
// driver's own view, unfiltered by any fault or plant.
type Instance struct {
	Driver string `json:"driver"`
	drivers.Status
}
