package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/fsnotify/fsnotify"
	"go.uber.org/goleak"
)

const testDebounce = 250 * time.Millisecond

// limit bounds every real-time wait in these tests. It is not a timing
// assertion: a healthy run never comes near it.
const limit = 20 * time.Second

// harness runs a watcher on the fake clock and sees the raw events its
// loop has handled, so a test knows every filesystem event of its writes
// has been taken into account before it moves the clock.
type harness struct {
	t        *testing.T
	w        *Watcher
	clk      *clock.Fake
	raw      chan fsnotify.Event
	stacks   atomic.Pointer[[]string]
	sentinel int
}

func startWatcher(t *testing.T, cfgPath string, stacks []string) *harness {
	t.Helper()
	h := &harness{t: t, clk: clock.NewFake(time.Unix(1_700_000_000, 0)), raw: make(chan fsnotify.Event, 1<<14)}
	h.stacks.Store(&stacks)
	w, err := watch(cfgPath, func() []string { return *h.stacks.Load() }, testDebounce, h.clk, func(ev fsnotify.Event) { h.raw <- ev })
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

// handled waits until the loop has handled every filesystem event caused
// so far in dir: it creates a sentinel file there and waits for its event
// (inotify delivers one watch's events in order).
func (h *harness) handled(dir string) {
	h.t.Helper()
	h.sentinel++
	p := filepath.Join(dir, fmt.Sprintf("sentinel-%d.tmp", h.sentinel))
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
	deadline := time.After(limit)
	for {
		select {
		case ev := <-h.raw:
			if ev.Name == p {
				return
			}
		case <-deadline:
			h.t.Fatalf("the watcher never saw %s", p)
		}
	}
}

// next advances the clock past the debounce and returns the event.
func (h *harness) next() Event {
	h.t.Helper()
	if h.clk.Pending() != 1 {
		h.t.Fatalf("%d timers pending, want the debounce timer", h.clk.Pending())
	}
	h.clk.Advance(testDebounce)
	select {
	case ev := <-h.w.Events():
		return ev
	case <-time.After(limit):
		h.t.Fatal("no event after the debounce")
	}
	return Event{}
}

func replaceByRename(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".swp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestDMN16WatchRenameOver: an editor that writes a temporary file and
// renames it over the config produces one event naming the config.
func TestDMN16WatchRenameOver(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "engenho.yaml", "log: {level: info}\n")
	h := startWatcher(t, cfg, nil)
	replaceByRename(t, cfg, "log: {level: debug}\n")
	h.handled(dir)
	ev := h.next()
	if !ev.Config || !reflect.DeepEqual(ev.Paths, []string{cfg}) || ev.Err != nil {
		t.Fatalf("event %+v, want the config only", ev)
	}
}

// TestDMN16WatchBurstDebounced: several writes in a burst (each a truncate
// and a write) are one event, only once the files stayed quiet for the
// debounce; the file is read when it settled.
func TestDMN16WatchBurstDebounced(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "engenho.yaml", "log: {level: info}\n")
	h := startWatcher(t, cfg, nil)
	for i := range 5 {
		writeFile(t, dir, "engenho.yaml", fmt.Sprintf("log: {level: debug} # %d\n", i))
	}
	h.handled(dir)
	h.clk.Advance(testDebounce - time.Millisecond)
	if h.clk.Pending() != 1 {
		t.Fatal("the debounce timer fired before the debounce passed")
	}
	// A write late in the burst pushes the deadline out again.
	writeFile(t, dir, "engenho.yaml", "log: {level: warn}\n")
	h.handled(dir)
	h.clk.Advance(testDebounce - time.Millisecond)
	if h.clk.Pending() != 1 {
		t.Fatal("the debounce was not re-armed by a write")
	}
	h.clk.Advance(time.Millisecond)
	ev := <-h.w.Events()
	if !ev.Config || len(ev.Paths) != 1 {
		t.Fatalf("event %+v", ev)
	}
	// One event for the whole burst: the next one is for the next change.
	writeFile(t, dir, "engenho.yaml", "log: {level: error}\n")
	h.handled(dir)
	if ev := h.next(); !ev.Config {
		t.Fatalf("second burst: %+v", ev)
	}
}

// TestDMN16WatchTruncateThenWrite: a truncate that settles before the
// writer is done is reported (the daemon's Load then says the file is
// empty), and the write after it is reported too.
func TestDMN16WatchTruncateThenWrite(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "engenho.yaml", "log: {level: info}\n")
	h := startWatcher(t, cfg, nil)
	if err := os.Truncate(cfg, 0); err != nil {
		t.Fatal(err)
	}
	h.handled(dir)
	if ev := h.next(); !ev.Config {
		t.Fatalf("truncate: %+v", ev)
	}
	writeFile(t, dir, "engenho.yaml", "log: {level: debug}\n")
	h.handled(dir)
	if ev := h.next(); !ev.Config {
		t.Fatalf("write after truncate: %+v", ev)
	}
}

// TestWatchSameContentIsQuiet: a touch, a chmod or a rewrite with the same
// bytes reports nothing; unrelated files in the directory are ignored.
func TestWatchSameContentIsQuiet(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "engenho.yaml", "log: {level: info}\n")
	other := writeFile(t, dir, "stack.yaml", "name: a\n")
	h := startWatcher(t, cfg, []string{other})
	writeFile(t, dir, "engenho.yaml", "log: {level: info}\n")
	now := time.Now()
	if err := os.Chtimes(cfg, now, now); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "notes.txt", "unrelated\n")
	h.handled(dir)
	h.clk.Advance(testDebounce) // settles with nothing changed
	// The next event is the stack file's alone: nothing was pending.
	writeFile(t, dir, "stack.yaml", "name: b\n")
	h.handled(dir)
	ev := h.next()
	if ev.Config || !reflect.DeepEqual(ev.Paths, []string{other}) {
		t.Fatalf("event %+v, want the stack file only", ev)
	}
}

// TestDMN16WatchStacks: files a glob matches appear and disappear as
// events; editor leftovers do not; a listed file in another directory is
// watched too.
func TestDMN16WatchStacks(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "etc/engenho.yaml", "stacks: ['../stacks.d/*.yaml', /elsewhere]\n")
	sd := filepath.Join(dir, "stacks.d")
	a := writeFile(t, sd, "a.yaml", "name: a\n")
	far := writeFile(t, dir, "far/web.yaml", "name: web\n")
	h := startWatcher(t, cfg, []string{"../stacks.d/*.yaml", far})

	b := writeFile(t, sd, "b.yaml", "name: b\n")
	writeFile(t, sd, ".b.yaml.swp", "junk")
	writeFile(t, sd, "b.yaml~", "junk")
	h.handled(sd)
	if ev := h.next(); !reflect.DeepEqual(ev.Paths, []string{b}) || ev.Config {
		t.Fatalf("new stack file: %+v", ev)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	replaceByRename(t, far, "name: web2\n")
	h.handled(sd)
	h.handled(filepath.Dir(far))
	if ev := h.next(); !reflect.DeepEqual(ev.Paths, []string{far, a}) {
		t.Fatalf("removed and replaced: %+v", ev)
	}
}

// TestWatchResync: after the stack list changes, Resync watches the new
// directories; files already there are not reported, later changes are.
func TestWatchResync(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "engenho.yaml", "{}\n")
	h := startWatcher(t, cfg, nil)
	nd := filepath.Join(dir, "new")
	writeFile(t, nd, "x.yaml", "name: x\n")
	list := []string{filepath.Join(nd, "*.yaml")}
	h.stacks.Store(&list)
	h.w.Resync()
	y := writeFile(t, nd, "y.yaml", "name: y\n")
	h.handled(nd)
	if ev := h.next(); !reflect.DeepEqual(ev.Paths, []string{y}) {
		t.Fatalf("after resync: %+v, want only the new file", ev)
	}
}

// TestWatchSlowReaderMerges: bursts the daemon has not read yet merge into
// one pending event.
func TestWatchSlowReaderMerges(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "engenho.yaml", "{}\n")
	s := writeFile(t, dir, "s.yaml", "name: s\n")
	h := startWatcher(t, cfg, []string{s})
	writeFile(t, dir, "engenho.yaml", "log: {level: debug}\n")
	h.handled(dir)
	h.clk.Advance(testDebounce)
	writeFile(t, dir, "s.yaml", "name: s2\n")
	h.handled(dir)
	h.clk.Advance(testDebounce)
	h.w.Resync() // the loop has settled both bursts
	ev := <-h.w.Events()
	if !ev.Config || !reflect.DeepEqual(ev.Paths, []string{cfg, s}) {
		t.Fatalf("merged event %+v", ev)
	}
}

// TestWatchSymlinkedConfig: a config that is a symlink into a directory
// swapped by renaming a ..data link (a Kubernetes ConfigMap) is followed.
func TestWatchSymlinkedConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "..v1/engenho.yaml", "log: {level: info}\n")
	writeFile(t, dir, "..v2/engenho.yaml", "log: {level: debug}\n")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..v1", filepath.Join(dir, "..data")))
	cfg := filepath.Join(dir, "engenho.yaml")
	must(os.Symlink("..data/engenho.yaml", cfg))
	h := startWatcher(t, cfg, nil)
	must(os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	h.handled(dir)
	if ev := h.next(); !ev.Config || !reflect.DeepEqual(ev.Paths, []string{cfg}) {
		t.Fatalf("swap: %+v", ev)
	}
}

// TestWatchRealClock: the same on the wall clock.
func TestWatchRealClock(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "engenho.yaml", "{}\n")
	w, err := Watch(cfg, nil, 10*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	replaceByRename(t, cfg, "log: {level: debug}\n")
	select {
	case ev := <-w.Events():
		if !ev.Config {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(limit):
		t.Fatal("no event")
	}
}

// TestWatchCloseLeaksNothing: Close ends every goroutine, even with a
// debounce timer armed and an event nobody read; Events is closed.
func TestWatchCloseLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "engenho.yaml", "{}\n")
	for _, clk := range []clock.Clock{clock.New(), clock.NewFake(time.Unix(0, 0))} {
		w, err := Watch(cfg, nil, time.Hour, clk)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "engenho.yaml", fmt.Sprintf("log: {level: debug} # %T\n", clk))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal("second Close:", err)
		}
		if _, open := <-w.Events(); open {
			t.Fatal("Events still open after Close")
		}
		w.Resync() // returns at once on a closed watcher
	}
	if _, err := Watch(filepath.Join(dir, "missing-dir", "engenho.yaml"), nil, 0, nil); err == nil {
		t.Fatal("watching a config in a missing directory: no error")
	}
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
