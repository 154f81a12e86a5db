package incus

import (
	"context"
	"sync"
	"time"
)

// fileQuiet is how long the driver leaves an instance's file API alone
// after incusd failed a request to it with a 5xx.
//
// incusd 6.0 serves an instance's files through a helper process
// (forkfile) that exits after 15s without a connection. When a request
// comes in while one exits, the old helper's cleanup deletes the socket
// of the helper started for the new request, and the request fails
// ("dial unix .../forkfile.sock: no such file or directory"). That helper
// keeps running, unreachable, for its own 15s, and every request made
// meanwhile fails the same way and starts another: retrying at once keeps
// the fault alive for as long as one retries (seen in CI: 30s of 500s).
// A request made once the helper has exited starts a fresh one. incus 7.3
// fixes the race (lxc/incus 3e06095).
const fileQuiet = 16 * time.Second

// fileAttempts bounds the reads of one file: the first and two more,
// each after fileQuiet.
const fileAttempts = 3

// fileGate remembers, per instance, until when its file API is left alone.
type fileGate struct {
	mu    sync.Mutex
	quiet map[string]time.Time
}

func (g *fileGate) until(name string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.quiet[name]
}

func (g *fileGate) failed(name string, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.quiet == nil {
		g.quiet = map[string]time.Time{}
	}
	if until.After(g.quiet[name]) {
		g.quiet[name] = until
	}
}

func (g *fileGate) forget(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.quiet, name)
}

// waitFiles waits out name's quiet time; false when ctx ended first.
func (d *Driver) waitFiles(ctx context.Context, name string) bool {
	if wait := d.files.until(name).Sub(d.clock.Now()); wait > 0 {
		return d.pause(ctx, wait)
	}
	return ctx.Err() == nil
}

// noteFileError starts name's quiet time when err is incusd failing, and
// reports whether it did.
func (d *Driver) noteFileError(name string, err error) bool {
	if !isServerError(err) {
		return false
	}
	d.files.failed(name, d.clock.Now().Add(fileQuiet))
	return true
}

// withFiles runs call, a request to name's files API: it waits out a
// quiet time, and calls again after incusd failed, up to fileAttempts
// calls. A new instance can meet incusd's forkfile race too
// (CI saw "forkfile.sock: no such file" writing an entrypoint).
func (d *Driver) withFiles(ctx context.Context, name string, call func() error) error {
	for attempt := 1; ; attempt++ {
		if !d.waitFiles(ctx, name) {
			return ctx.Err()
		}
		err := d.gated(ctx, name, call)
		if !d.noteFileError(name, err) || attempt == fileAttempts {
			return err
		}
	}
}

// readFile reads path inside name from offset, waiting out a quiet time
// and trying again after incusd failed, up to fileAttempts reads.
func (d *Driver) readFile(ctx context.Context, name, path string, offset int64) (FileRange, error) {
	var fr FileRange
	err := d.withFiles(ctx, name, func() (err error) {
		fr, err = d.c.ReadFile(ctx, name, path, offset)
		return err
	})
	return fr, err
}

// instanceGate lets one request at a time touch an instance's files or
// start it. incusd 6.0 serves the files of a stopped container through a
// helper (forkfile) that mounts its root; a start waits for that helper to
// exit, and stops it only if it finds the helper's pid file. A start that
// lands while a file request is still spawning the helper misses the pid
// file and then waits for the helper's own exit, 15s after the last
// request, and every later file request keeps it alive. The replica
// reads a dead instance's exit code and output while it restarts it, so
// this happened (CI: a box's start blocked for minutes, every retry timing
// out). With the gate, a start comes after the file request has returned,
// when the helper's pid file is written and the start can stop it.
type instanceGate struct {
	mu    sync.Mutex
	slots map[string]*gateSlot
}

type gateSlot struct {
	turn  chan struct{}
	users int
}

// enter waits for name's turn; leave gives it back. It returns ctx's
// error when ctx ends first.
func (g *instanceGate) enter(ctx context.Context, name string) (leave func(), err error) {
	g.mu.Lock()
	if g.slots == nil {
		g.slots = map[string]*gateSlot{}
	}
	s := g.slots[name]
	if s == nil {
		s = &gateSlot{turn: make(chan struct{}, 1)}
		g.slots[name] = s
	}
	s.users++
	g.mu.Unlock()
	select {
	case s.turn <- struct{}{}:
		return func() { <-s.turn; g.release(name, s) }, nil
	case <-ctx.Done():
		g.release(name, s)
		return nil, ctx.Err()
	}
}

func (g *instanceGate) release(name string, s *gateSlot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.users--; s.users == 0 {
		delete(g.slots, name)
	}
}

// gated runs call in name's turn (see instanceGate).
func (d *Driver) gated(ctx context.Context, name string, call func() error) error {
	leave, err := d.gate.enter(ctx, name)
	if err != nil {
		return err
	}
	defer leave()
	return call()
}
