package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/dgraph-io/badger/v4"
)

// ErrWriteFailed: the disk failed a journal write (EIO, or another error
// the kernel returned while writing or syncing). Nothing of that write is
// in force: it was undone, and the journal writes nothing more until what
// it holds is safely on disk again (see resync). The error is a
// *WriteError; retrying once the disk writes again succeeds.
var ErrWriteFailed = errors.New("journal: the disk failed a write")

// WriteError says which journal the disk failed and with what.
type WriteError struct {
	Dir string
	Err error
	// Restart: writing the memory table out failed halfway; badger cannot
	// try it again, so the journal writes nothing more until the daemon
	// restarts (which replays and writes it out).
	Restart bool
}

func (e *WriteError) Error() string {
	if e.Restart {
		return fmt.Sprintf("journal %s: the disk failed a write, and writing the journal's memory table out failed too (%v): nothing more is recorded until the daemon restarts; restart it once the disk writes again",
			e.Dir, e.Err)
	}
	return fmt.Sprintf("journal %s: the disk failed a write (%v): nothing was recorded; writes resume once the disk writes again, retry then",
		e.Dir, e.Err)
}

func (e *WriteError) Is(target error) bool { return target == ErrWriteFailed }
func (e *WriteError) Unwrap() error        { return e.Err }

// diskFailed says whether a commit failed in the kernel (write, fsync,
// msync): badger had already put the commit's writes in its memory table,
// where readers see them, before the sync that failed.
func diskFailed(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno)
}

// reader is what the reading helpers need of a transaction, read-only or
// not.
type reader interface {
	Get(key []byte) (*badger.Item, error)
	NewIterator(opt badger.IteratorOptions) *badger.Iterator
}

// image is what a key held before a transaction wrote it.
type image struct {
	value   []byte
	present bool
}

// writeTxn is a badger write transaction that remembers what each key
// held before its first write in it, so that a commit the disk fails can
// be undone (Journal.commit).
type writeTxn struct {
	*badger.Txn
	before map[string]image
	// remembered is the bytes of the keys and values in before: what
	// the undo writes back.
	remembered int
}

func (j *Journal) newWrite() *writeTxn {
	return &writeTxn{Txn: j.db.NewTransaction(true), before: map[string]image{}}
}

func (t *writeTxn) remember(key []byte) error {
	if _, ok := t.before[string(key)]; ok {
		return nil
	}
	item, err := t.Txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		t.before[string(key)] = image{}
		return nil
	}
	if err != nil {
		return err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return err
	}
	t.before[string(key)] = image{value: v, present: true}
	t.remembered += len(key) + len(v)
	return nil
}

// Set writes key, remembering what it held.
func (t *writeTxn) Set(key, value []byte) error {
	if err := t.remember(key); err != nil {
		return err
	}
	return t.Txn.Set(key, value)
}

// setNew writes a key the caller knows is absent (an event past the last
// sequence number): its undo is a delete, and no read is spent on it.
func (t *writeTxn) setNew(key, value []byte) error {
	if _, ok := t.before[string(key)]; !ok {
		t.before[string(key)] = image{}
	}
	return t.Txn.Set(key, value)
}

// Delete deletes key, remembering what it held.
func (t *writeTxn) Delete(key []byte) error {
	if err := t.remember(key); err != nil {
		return err
	}
	return t.Txn.Delete(key)
}

// commit commits t synced. When the disk fails the commit, its writes are
// undone and the journal refuses writes until resync has put what it
// holds on disk again.
func (j *Journal) commit(t *writeTxn) error {
	err := t.Commit()
	if err == nil || !diskFailed(err) {
		return err
	}
	j.unsynced.Store(true)
	if j.opts.KeepFailedWrites {
		j.log.Error().Err(err).Msg("the disk failed a journal write: kept, not undone (the keep-failed-write plant)")
	} else {
		j.undo(t.before)
		j.log.Error().Err(err).Int("keys", len(t.before)).Msg("the disk failed a journal write: it was undone, and writes wait until the disk writes again")
	}
	return &WriteError{Dir: j.opts.Dir, Err: err}
}

// undo writes back what the keys held. Its own commit fails too while the
// disk fails, but like the failed one it reaches the memory table first,
// which is what readers see; resync later puts that table on disk.
func (j *Journal) undo(before map[string]image) {
	txn := j.db.NewTransaction(true)
	defer txn.Discard()
	for k, im := range before {
		var err error
		if im.present {
			err = txn.Set([]byte(k), im.value)
		} else {
			err = txn.Delete([]byte(k))
		}
		if err != nil {
			j.log.Error().Err(err).Str("key", k).Msg("undoing a failed journal write")
			return
		}
	}
	if err := txn.Commit(); err != nil && !diskFailed(err) {
		j.log.Error().Err(err).Msg("undoing a failed journal write")
	}
}

// keyFlushMarker is written, then dropped, by resync: dropping a prefix is
// the one badger call that writes the memory table out to a table file.
const keyFlushMarker = "journal/flush-marker"

// resync is the way back after a failed write. The pages of the
// write-ahead log written while the disk failed never reached it, and a
// restart stops reading the log at the first of them: every later write,
// acknowledged or not, would be lost. So nothing more is written to that
// log: once a probe file can be written and synced, the memory table
// (which holds everything, the undo included) goes to a table file and
// the log is retired. Until then every write is refused.
//
// Badger's writes are blocked while the memory table is written out
// (DropPrefix), so resync holds writeMu, which every commit holds shared.
// A DropPrefix that fails halfway leaves badger's memory tables listed
// twice, and a second one would free a table still in use: the journal
// then refuses writes until the daemon restarts.
func (j *Journal) resync() error {
	if !j.unsynced.Load() {
		return nil
	}
	j.resyncMu.Lock()
	defer j.resyncMu.Unlock()
	if !j.unsynced.Load() {
		return nil
	}
	if j.flushFailed != nil {
		return j.flushFailed
	}
	if err := probeWrite(j.opts.Dir); err != nil {
		return &WriteError{Dir: j.opts.Dir, Err: err}
	}
	j.writeMu.Lock()
	defer j.writeMu.Unlock()
	if err := rewriteLogs(j.opts.Dir); err != nil {
		return &WriteError{Dir: j.opts.Dir, Err: err}
	}
	err := j.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(keyFlushMarker), []byte{1}) })
	if err != nil {
		return &WriteError{Dir: j.opts.Dir, Err: err}
	}
	if err := j.db.DropPrefix([]byte(keyFlushMarker)); err != nil {
		j.flushFailed = &WriteError{Dir: j.opts.Dir, Err: err, Restart: true}
		j.log.Error().Err(err).Msg("writing the journal's memory table out failed: the journal records nothing more until the daemon restarts")
		return j.flushFailed
	}
	j.unsynced.Store(false)
	j.log.Info().Msg("the disk writes again: the journal's memory table is on disk and writes resume")
	return nil
}

// rewriteLogs writes badger's logs (the write-ahead logs, *.mem, and the
// newest value log, where large values go) back to the disk from the page
// cache: the pages whose writeback failed are still there, clean, and
// would never be written again, so the file on disk has a hole that a
// restart's replay stops at (and badger cuts the value log there). The
// memory table's flush that follows retires the write-ahead log, but the
// value log stays in use: its lost pages must reach the disk. Blocks of
// zeros are skipped (a sparse file's unused end). Writes are held
// meanwhile (writeMu), so the files do not change under it.
func rewriteLogs(dir string) error {
	mems, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return err
	}
	vlogs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		return err
	}
	files := mems
	if len(vlogs) > 0 {
		sort.Strings(vlogs)
		files = append(files, vlogs[len(vlogs)-1])
	}
	buf := make([]byte, 1<<20)
	for _, path := range files {
		if err := rewriteFromCache(path, buf); err != nil {
			return err
		}
	}
	return nil
}

// rewriteFromCache rewrites every block of path that is not all zeros, in
// place, and syncs it.
func rewriteFromCache(path string, buf []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for off := int64(0); ; {
		n, rerr := f.ReadAt(buf, off)
		if n > 0 && !allZero(buf[:n]) {
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return fmt.Errorf("rewriting %s at %d: %w", path, off, err)
			}
		}
		off += int64(n)
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("reading %s at %d: %w", path, off, rerr)
		}
	}
	return f.Sync()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// probeWrite writes, syncs and removes a small file in dir.
func probeWrite(dir string) error {
	path := filepath.Join(dir, "write-probe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("engenho journal write probe\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(path); err == nil {
		err = rerr
	}
	return err
}

// Unsynced reports whether the journal is waiting for the disk after a
// failed write (it refuses writes until then).
func (j *Journal) Unsynced() bool { return j.unsynced.Load() }
