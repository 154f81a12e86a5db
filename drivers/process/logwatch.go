package process

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Log rotation checks (DRV-3, PERF-3). A workload writes its output file
// itself, so the driver learns the file's size only by looking. It looks
// every rotateEvery, but only at the files being written ("hot"): a file
// found at the same size as at the check before is handed to inotify (one
// shot, IN_MODIFY) and not looked at again until the kernel says it was
// written to. A node whose workloads are quiet has no rotation timer at
// all. A file inotify cannot watch (no inotify, fs.inotify.max_user_watches
// reached) stays hot: checked every second, as every file was before.

// errNoInotify: the process has no inotify instance to watch with.
var errNoInotify = errors.New("inotify is not available")

// logWatcher is the process-wide inotify instance (one however many
// drivers: fs.inotify.max_user_instances is 128 by default). Like the
// reaper it is reference-counted: the first acquire opens it and starts
// its reader, the last release closes it and waits for the reader.
type logWatcher struct {
	mu    sync.Mutex
	refs  int
	f     *os.File // nil when closed or unavailable
	fd    int
	done  chan struct{} // closed when the reader has returned
	fires map[int32]func()
}

var theLogWatcher = &logWatcher{}

func (w *logWatcher) acquire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refs++
	if w.refs > 1 {
		return
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return // every file stays hot
	}
	// Non-blocking, so the runtime's poller parks the reader: no thread
	// and no wake-up while nothing is written.
	w.f, w.fd = os.NewFile(uintptr(fd), "inotify"), fd
	w.fires = map[int32]func(){}
	w.done = make(chan struct{})
	go w.read(w.f, w.done)
}

func (w *logWatcher) release() {
	w.mu.Lock()
	w.refs--
	if w.refs > 0 || w.f == nil {
		w.mu.Unlock()
		return
	}
	f, done := w.f, w.done
	w.f, w.fires = nil, nil
	w.mu.Unlock()
	f.Close() // ends the reader's Read
	<-done
}

// watch calls fire once, at the next write to path. It fails when inotify
// cannot watch the file.
func (w *logWatcher) watch(path string, fire func()) (int32, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return 0, errNoInotify
	}
	wd, err := unix.InotifyAddWatch(w.fd, path, unix.IN_MODIFY|unix.IN_ONESHOT)
	if err != nil {
		return 0, &os.PathError{Op: "inotify_add_watch", Path: path, Err: err}
	}
	w.fires[int32(wd)] = fire
	return int32(wd), nil
}

// unwatch drops a watch that has not fired.
func (w *logWatcher) unwatch(wd int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.fires[wd]; !ok || w.f == nil {
		return
	}
	delete(w.fires, wd)
	_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
}

// read delivers inotify's events until the file is closed. A one-shot
// watch reports IN_MODIFY, then IN_IGNORED as the kernel drops it; a
// watch on a file that was deleted reports only IN_IGNORED, which fires
// nothing (a new run's Start marks its file hot).
func (w *logWatcher) read(f *os.File, done chan struct{}) {
	defer close(done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := f.Read(buf)
		if err != nil {
			return
		}
		var fire []func()
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			fn, ok := w.fires[wd]
			if ok {
				delete(w.fires, wd)
				if mask&unix.IN_MODIFY != 0 {
					fire = append(fire, fn)
				}
			}
			off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
		}
		w.mu.Unlock()
		for _, fn := range fire {
			fn()
		}
	}
}

// logWritten marks in's output file hot: it is checked at the next
// rotation tick, which is armed if it was not.
func (d *Driver) logWritten(in *instance) {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	if d.logStop {
		return
	}
	if wd, ok := d.logWds[in]; ok {
		delete(d.logWds, in)
		theLogWatcher.unwatch(wd)
	}
	if _, ok := d.logHot[in]; !ok {
		d.logHot[in] = -1
	}
	d.armRotationLocked()
}

// logForget stops checking in's output file (the instance is deleted).
func (d *Driver) logForget(in *instance) {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	delete(d.logHot, in)
	if wd, ok := d.logWds[in]; ok {
		delete(d.logWds, in)
		theLogWatcher.unwatch(wd)
	}
}

// armRotationLocked arms the rotation tick while a file is hot; the
// caller holds logMu.
func (d *Driver) armRotationLocked() {
	if d.rotation == nil && !d.logStop && len(d.logHot) > 0 {
		d.rotation = d.clk.AfterFunc(rotateEvery, d.rotateTick)
	}
}

// rotateTick rotates the hot files that are full and hands the ones that
// stopped growing to inotify; it arms the next tick while any stays hot.
func (d *Driver) rotateTick() {
	d.logMu.Lock()
	d.rotation = nil
	if d.logStop {
		d.logMu.Unlock()
		return
	}
	d.rotating.Add(1)
	hot := make([]*instance, 0, len(d.logHot))
	for in := range d.logHot {
		hot = append(hot, in)
	}
	d.logMu.Unlock()
	defer d.rotating.Done()
	for _, in := range hot {
		size, err := in.logs.check()
		if err != nil {
			d.log.Warn().Err(err).Str("instance", in.name).Msg("log rotation failed")
		}
		d.settleLog(in, size)
	}
	d.logMu.Lock()
	d.armRotationLocked()
	d.logMu.Unlock()
}

// settleLog records the size a check found (-1: no file). A file that
// did not grow since the check before is watched by inotify instead; one
// that is gone is dropped (the next Start marks it hot again).
func (d *Driver) settleLog(in *instance, size int64) {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	last, ok := d.logHot[in]
	switch {
	case !ok || d.logStop: // forgotten meanwhile
		return
	case size < 0:
		delete(d.logHot, in)
		return
	case size != last:
		d.logHot[in] = size
		return
	}
	wd, err := theLogWatcher.watch(in.logs.path, func() { d.logWritten(in) })
	if err != nil {
		if !d.logPolls {
			d.logPolls = true
			d.log.Info().Err(err).Msg("log files that inotify cannot watch are checked for rotation every second")
		}
		return
	}
	// A write between the check and the watch may have gone unseen.
	if fi, err := os.Stat(in.logs.path); err != nil || fi.Size() != size {
		theLogWatcher.unwatch(wd)
		return
	}
	delete(d.logHot, in)
	d.logWds[in] = wd
}
