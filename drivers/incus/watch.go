package incus

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers"
)

// Watch calls fn once when the named container's current run ends: it
// stops, is deleted, or has started again (restarted behind our back). incus
// has no event stream this driver uses (that needs a websocket), so one
// poller goroutine per Driver lists the project's instances each
// PollInterval (one call, whatever the number of watches); Close stops it. A container
// that is not running when Watch is called fires at the next poll with its
// last exit, so an exit between Start and Watch is never lost.
//
// fn runs on the poller goroutine and should hand off quickly. Like
// time.Timer.Stop, stop does not wait for a call of fn already under way;
// once stop has returned no new call begins.
func (d *Driver) Watch(name string, fn func(drivers.Exit)) (func(), error) {
	if err := checkName("watch", name); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	in, err := d.instance(ctx, name)
	if err != nil {
		return nil, d.fail("watch", name, err)
	}
	w := &watch{name: name, fn: fn, run: in.LastUsedAt}
	switch mapState(in.Status) {
	case drivers.StateStopped:
		w.over = true
	case drivers.StateStarting, drivers.StateUnknown:
		// last_used_at may not have moved yet: take it once running.
		w.pending = true
	}
	if err := d.watcher.add(w); err != nil {
		return nil, err
	}
	return func() { d.watcher.remove(w) }, nil
}

// watch is one armed Watch.
type watch struct {
	name string
	fn   func(drivers.Exit)
	// run identifies the watched run: the instance's last_used_at, which
	// incusd moves at every start (before the container shows running).
	run time.Time
	// over: the container was stopped at Watch; fire with its last exit.
	over bool
	// pending: it was starting at Watch; run is taken when it shows running
	// (only the poller goroutine touches pending and run after Watch).
	pending bool
}

// watcher is the Driver's one poller goroutine and its armed watches.
type watcher struct {
	d       *Driver
	mu      sync.Mutex
	watches map[*watch]struct{}
	started bool
	closed  bool
	wake    chan struct{}
	quit    chan struct{}
	wg      sync.WaitGroup
}

func newWatcher(d *Driver) *watcher {
	return &watcher{d: d, watches: map[*watch]struct{}{}, wake: make(chan struct{}, 1), quit: make(chan struct{})}
}

func (wr *watcher) add(w *watch) error {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.closed {
		return drivers.Errorf(DriverName, "watch", w.name, drivers.ErrInvalid, "driver is closed")
	}
	wr.watches[w] = struct{}{}
	if !wr.started {
		wr.started = true
		wr.wg.Add(1)
		go wr.loop()
	}
	select { // look soon: the run may already be over
	case wr.wake <- struct{}{}:
	default:
	}
	return nil
}

func (wr *watcher) remove(w *watch) {
	wr.mu.Lock()
	delete(wr.watches, w)
	wr.mu.Unlock()
}

func (wr *watcher) close() {
	wr.mu.Lock()
	if wr.closed {
		wr.mu.Unlock()
		return
	}
	wr.closed = true
	wr.watches = map[*watch]struct{}{}
	close(wr.quit)
	wr.mu.Unlock()
	wr.wg.Wait()
}

func (wr *watcher) loop() {
	defer wr.wg.Done()
	for {
		t := wr.d.clock.NewTimer(wr.d.opts.PollInterval)
		select {
		case <-wr.quit:
			t.Stop()
			return
		case <-wr.wake:
			t.Stop()
		case <-t.C():
		}
		wr.poll()
	}
}

// poll looks once at every watched container: one list of the project's
// instances (without their state, which is cheap for incusd), then the exit
// code of those that stopped.
func (wr *watcher) poll() {
	wr.mu.Lock()
	var ws []*watch
	for w := range wr.watches {
		ws = append(ws, w)
	}
	wr.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	d := wr.d
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var list []Instance
	if err := d.c.get(ctx, "/1.0/instances", url.Values{"recursion": {"1"}}, &list); err != nil {
		d.log.Debug().Err(err).Msg("watch: could not list instances, will retry")
		return
	}
	byName := make(map[string]Instance, len(list))
	for _, in := range list {
		byName[in.Name] = in
	}
	exits := map[string]drivers.Exit{}
	for _, w := range ws {
		in, found := byName[w.name]
		if found && !runEnded(w, in) {
			continue
		}
		exit, seen := exits[w.name]
		if !seen {
			exit = drivers.Exit{Name: w.name, ExitCode: -1, At: d.clock.Now()}
			switch {
			case !found:
				exit.Signal = "deleted"
			case mapState(in.Status) == drivers.StateStopped && hasEntrypoint(in):
				var ok bool
				if exit.ExitCode, exit.Signal, ok = d.lastExit(ctx, in); !ok {
					continue // try the exit code again next tick
				}
			}
			exits[w.name] = exit
		}
		wr.fire(w, exit)
	}
}

// runEnded reports whether the run w watches is over: the container was
// stopped at Watch, is stopped now, or has started again since.
func runEnded(w *watch, in Instance) bool {
	state := mapState(in.Status)
	if w.pending && state == drivers.StateRunning {
		w.pending, w.run = false, in.LastUsedAt
		return false
	}
	if w.over || state == drivers.StateStopped {
		return true
	}
	return !w.pending && !in.LastUsedAt.Equal(w.run)
}

// fire calls w.fn once unless the watch was stopped or has fired; the
// watch is disarmed before the call.
func (wr *watcher) fire(w *watch, exit drivers.Exit) {
	wr.mu.Lock()
	_, armed := wr.watches[w]
	delete(wr.watches, w)
	wr.mu.Unlock()
	if armed {
		w.fn(exit)
	}
}
