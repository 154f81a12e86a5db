package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/engenho/engenho/configs/daemonconfig"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long the files must stay quiet before a burst of
// writes is reported.
const DefaultDebounce = 250 * time.Millisecond

// Event says which watched files changed during one settled burst of
// writes (DMN-16).
type Event struct {
	// Paths are the files whose content differs from the last time the
	// watcher looked (created, rewritten or removed): absolute and sorted.
	// They are the paths the watcher was given (a symlink, not its target).
	Paths []string
	// Config is set when the config file is among Paths.
	Config bool
	// Err is a watch problem (not a config problem); Paths may still be
	// set. The watcher keeps going.
	Err error
}

// Watcher watches the config file and the stack files it lists. It
// watches directories, not files, because editors replace a file by
// writing a new one and renaming it over the old. Every relevant
// filesystem event re-arms a debounce timer (on the injected clock); when
// it fires, the watcher re-reads the candidate files and reports those
// whose SHA-256 changed, so a touch, a chmod or a rewrite with the same
// bytes reports nothing and a burst of writes reports once.
//
// If the daemon does not read Events for a while, later bursts merge into
// the pending Event: nothing is lost, nothing blocks the watcher.
type Watcher struct {
	cfgPath    string
	cfgDir     string
	stackPaths func() []string
	debounce   time.Duration
	clk        clock.Clock
	fw         *fsnotify.Watcher

	out     chan Event
	settled chan uint64
	resync  chan chan struct{}
	done    chan struct{}
	closed  sync.Once
	wg      sync.WaitGroup

	// Owned by the loop goroutine.
	patterns []string         // absolute stack paths and globs
	targets  map[string]bool  // symlink targets of the literal paths
	cfgLink  bool             // the config path is a symlink
	watched  map[string]bool  // directories
	known    map[string]state // last seen state of each candidate file
	timer    clock.Timer
	gen      uint64
	pending  Event
	ready    bool
	onRaw    func(fsnotify.Event) // tests: called after each raw event
}

// state is what the watcher last saw of a file.
type state struct {
	exists bool
	digest daemonconfig.Digest
	err    string // a read error other than "does not exist"
}

// Watch starts watching cfgPath and the stack files and globs stackPaths
// returns (typically the current config's Stacks). stackPaths is called
// from the watcher's goroutine when it starts, after every burst and on
// Resync: it must be safe for that (read an atomic pointer). debounce <= 0
// means DefaultDebounce; a nil clk is the wall clock.
//
// Start the watcher before the first Load, so no change can fall between
// reading the file and watching it; call Resync after each Load that
// changed the stack list, before reading the stack files.
func Watch(cfgPath string, stackPaths func() []string, debounce time.Duration, clk clock.Clock) (*Watcher, error) {
	return watch(cfgPath, stackPaths, debounce, clk, nil)
}

// watch is Watch with a hook tests use to know which raw events the loop
// has handled.
func watch(cfgPath string, stackPaths func() []string, debounce time.Duration, clk clock.Clock, onRaw func(fsnotify.Event)) (*Watcher, error) {
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("config watch %s: %w", cfgPath, err)
	}
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	if clk == nil {
		clk = clock.New()
	}
	if stackPaths == nil {
		stackPaths = func() []string { return nil }
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("config watch %s: %w", abs, err)
	}
	w := &Watcher{
		cfgPath: abs, cfgDir: filepath.Dir(abs), stackPaths: stackPaths,
		debounce: debounce, clk: clk, fw: fw,
		out: make(chan Event), settled: make(chan uint64), resync: make(chan chan struct{}),
		done: make(chan struct{}), watched: map[string]bool{}, known: map[string]state{},
		onRaw: onRaw,
	}
	if err := w.sync(); err != nil {
		fw.Close()
		return nil, err
	}
	w.baseline()
	w.wg.Add(1)
	go w.loop()
	return w, nil
}

// Events delivers one Event per settled burst. It is closed by Close.
func (w *Watcher) Events() <-chan Event { return w.out }

// Resync re-reads stackPaths, watches the directories it now needs and
// records the current content of files it did not know, without reporting
// them (the caller is about to read them). It returns once done.
func (w *Watcher) Resync() {
	ack := make(chan struct{})
	select {
	case w.resync <- ack:
		<-ack
	case <-w.done:
	}
}

// Close stops the watcher and waits for its goroutine; Events is closed.
func (w *Watcher) Close() error {
	var err error
	w.closed.Do(func() {
		close(w.done)
		w.wg.Wait()
		err = w.fw.Close()
	})
	return err
}

func (w *Watcher) loop() {
	defer w.wg.Done()
	defer close(w.out)
	defer func() {
		if w.timer != nil {
			w.timer.Stop()
		}
	}()
	for {
		var send chan Event
		if w.ready {
			send = w.out
		}
		select {
		case <-w.done:
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if w.relevant(ev) {
				w.arm()
			}
			if w.onRaw != nil {
				w.onRaw(ev)
			}
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				w.pending.Err = fmt.Errorf("config watch: %w", err)
				w.ready = true
			}
			// Events may have been lost: look at everything.
			w.arm()
		case g := <-w.settled:
			if g == w.gen {
				w.timer = nil
				w.settle()
			}
		case ack := <-w.resync:
			if err := w.sync(); err != nil {
				w.pending.Err, w.ready = err, true
			}
			w.baseline()
			close(ack)
		case send <- w.pending:
			w.pending, w.ready = Event{}, false
		}
	}
}

// arm (re)starts the debounce timer. A timer that already fired but whose
// signal is still on its way carries an old generation and is ignored.
func (w *Watcher) arm() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.gen++
	gen := w.gen
	w.timer = w.clk.AfterFunc(w.debounce, func() {
		select {
		case w.settled <- gen:
		case <-w.done:
		}
	})
}

// relevant reports whether a raw event may concern a watched file.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	p := ev.Name
	if p == w.cfgPath || w.targets[p] {
		return true
	}
	// A symlinked config (a Kubernetes ConfigMap swaps a ..data link
	// beside it): any change in its directory may have moved it.
	if w.cfgLink && filepath.Dir(p) == w.cfgDir {
		return true
	}
	if _, ok := w.known[p]; ok {
		return true
	}
	for _, pat := range w.patterns {
		if !daemonconfig.IsGlob(pat) {
			if p == pat {
				return true
			}
			continue
		}
		if ok, _ := filepath.Match(pat, p); ok && daemonconfig.GlobCandidate(p) {
			return true
		}
		// A new directory matching a glob's directory part.
		if dir := filepath.Dir(pat); daemonconfig.IsGlob(dir) {
			if ok, _ := filepath.Match(dir, p); ok {
				return true
			}
		}
	}
	return false
}

// settle runs when a burst is over: report what changed, then follow the
// stack list (it may now need other directories).
func (w *Watcher) settle() {
	changed := w.scan(true)
	if err := w.sync(); err != nil {
		w.pending.Err, w.ready = err, true
	}
	if len(changed) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, p := range w.pending.Paths {
		seen[p] = true
	}
	for _, p := range changed {
		if !seen[p] {
			w.pending.Paths = append(w.pending.Paths, p)
		}
		if p == w.cfgPath {
			w.pending.Config = true
		}
	}
	sort.Strings(w.pending.Paths)
	w.ready = true
}

// baseline records the state of candidates not yet known.
func (w *Watcher) baseline() { w.scan(false) }

// scan reads every candidate file. With report, it returns those whose
// state differs from what was known and records the new states; without,
// it only records files it did not know.
func (w *Watcher) scan(report bool) []string {
	cands := map[string]bool{w.cfgPath: true}
	for _, pat := range w.patterns {
		if !daemonconfig.IsGlob(pat) {
			cands[pat] = true
			continue
		}
		matches, _ := filepath.Glob(pat)
		for _, m := range matches {
			if daemonconfig.GlobCandidate(m) {
				cands[m] = true
			}
		}
	}
	for p := range w.known {
		cands[p] = true
	}
	var changed []string
	for p := range cands {
		old, wasKnown := w.known[p]
		if !report && wasKnown {
			continue
		}
		now := readState(p)
		if report && now != old {
			changed = append(changed, p)
		}
		if now.exists || now.err != "" {
			w.known[p] = now
		} else {
			delete(w.known, p)
		}
	}
	sort.Strings(changed)
	return changed
}

func readState(p string) state {
	fi, err := os.Stat(p)
	if err == nil && fi.IsDir() {
		return state{}
	}
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return state{}
	case err != nil:
		return state{exists: true, err: err.Error()}
	}
	return state{exists: true, digest: daemonconfig.DigestOf(b)}
}

// sync re-reads the stack list and watches the directories it needs: the
// config file's, each stack path's, the directories a glob's directory
// part matches, and the directories symlinked paths point into. Only the
// config file's directory must exist; the others are picked up when they
// appear (at the next burst or Resync).
func (w *Watcher) sync() error {
	w.patterns = w.patterns[:0]
	for _, p := range w.stackPaths() {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(w.cfgDir, p)
		}
		w.patterns = append(w.patterns, filepath.Clean(p))
	}
	want := map[string]bool{w.cfgDir: true}
	w.targets = map[string]bool{}
	literal := func(p string) {
		want[filepath.Dir(p)] = true
		if t, err := filepath.EvalSymlinks(p); err == nil && t != p {
			w.targets[t] = true
			want[filepath.Dir(t)] = true
		}
	}
	literal(w.cfgPath)
	fi, err := os.Lstat(w.cfgPath)
	w.cfgLink = err == nil && fi.Mode()&fs.ModeSymlink != 0
	for _, pat := range w.patterns {
		dir := filepath.Dir(pat)
		switch {
		case !daemonconfig.IsGlob(pat):
			literal(pat)
		case daemonconfig.IsGlob(dir):
			matches, _ := filepath.Glob(dir)
			for _, m := range matches {
				if fi, err := os.Stat(m); err == nil && fi.IsDir() {
					want[m] = true
				}
			}
		default:
			want[dir] = true
		}
	}
	for d := range want {
		if w.watched[d] {
			continue
		}
		if err := w.fw.Add(d); err != nil {
			if d == w.cfgDir {
				return fmt.Errorf("config watch %s: %w", d, err)
			}
			continue
		}
		w.watched[d] = true
	}
	for d := range w.watched {
		if !want[d] {
			_ = w.fw.Remove(d)
			delete(w.watched, d)
		}
	}
	return nil
}
