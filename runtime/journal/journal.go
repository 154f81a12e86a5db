package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers/clock"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxEvents         = 100_000
	DefaultMaxEventAge       = 30 * 24 * time.Hour
	DefaultRetentionInterval = 10 * time.Minute
	DefaultGCInterval        = 10 * time.Minute
	DefaultGCDiscardRatio    = 0.5
)

// Options configure Open. Only Dir is required.
type Options struct {
	// Dir is the badger directory, DATA/journal. Created (0700) if absent.
	Dir string
	// Clock drives retention and GC timers and stamps records. Default: the
	// wall clock.
	Clock clock.Clock
	// Logger receives the journal's own logs and badger's, adapted: badger's
	// errors and warnings keep their level, its info and debug chatter is
	// logged at debug and trace. The zero Logger logs nothing.
	Logger zerolog.Logger
	// NoSync turns off fsync for every write. For tests and benchmarks on
	// throwaway directories only: an acknowledged intent then survives a
	// process crash (badger's logs are memory-mapped) but not a power loss.
	NoSync bool
	// Retention bounds the event log.
	Retention Retention
	// GCInterval is how often badger's value-log GC runs (default 10m;
	// negative disables the background GC).
	GCInterval time.Duration
	// GCDiscardRatio is the share of stale data a value-log file needs
	// before GC rewrites it (default 0.5).
	GCDiscardRatio float64

	// Reserve is the free space the journal keeps on its file system: a
	// write that finds less is refused with ErrNoSpace (a *NoSpaceError)
	// and nothing reaches badger, whose memory-mapped logs would otherwise
	// kill the process with SIGBUS on a full disk. 0 takes the default
	// (three memtables and a value-log file: 112 MiB); negative turns the
	// check off.
	Reserve int64

	// KeepFailedWrites leaves a commit the disk failed in badger's memory
	// table instead of undoing it (writefail.go): the bug the chaos
	// self-test plants (keep-failed-write) to prove the campaign sees a
	// refused intent come into force. Never set otherwise.
	KeepFailedWrites bool

	// Previous, when set, is how the previous process left the journal, as
	// ReadPreviousClose saw it before a Check opened and closed it (which
	// leaves it closed cleanly).
	Previous *PreviousClose

	// small shrinks badger's memtable and value-log files, for tests that
	// open many journals.
	small bool
	// nativeCompactors, when > 0, runs that many badger compactors instead
	// of the journal's write-driven compaction: the benchmarks compare the
	// two in the same run.
	nativeCompactors int
	// l0Tables, when > 0, is badger's NumLevelZeroTables (tests: a level
	// 0 over its target after a few small memtables).
	l0Tables int
}

// Retention bounds the event log by count and by age. Zero fields take the
// defaults; a negative MaxEvents or MaxAge disables that bound; a negative
// Interval disables the background pass (PruneEvents still works).
type Retention struct {
	MaxEvents int
	MaxAge    time.Duration
	Interval  time.Duration
	// MaxAudit bounds the deploy audit log (default DefaultMaxAudit;
	// negative: unbounded). Applied at every audit write.
	MaxAudit int
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	if o.Retention.MaxEvents == 0 {
		o.Retention.MaxEvents = DefaultMaxEvents
	}
	if o.Retention.MaxAge == 0 {
		o.Retention.MaxAge = DefaultMaxEventAge
	}
	if o.Retention.MaxAudit == 0 {
		o.Retention.MaxAudit = DefaultMaxAudit
	}
	if o.Retention.Interval == 0 {
		o.Retention.Interval = DefaultRetentionInterval
	}
	if o.GCInterval == 0 {
		o.GCInterval = DefaultGCInterval
	}
	if o.GCDiscardRatio <= 0 || o.GCDiscardRatio >= 1 {
		o.GCDiscardRatio = DefaultGCDiscardRatio
	}
	return o
}

// CloseState says how the journal was left by the previous process.
type CloseState string

const (
	// FirstOpen: the directory held no journal.
	FirstOpen CloseState = "first_open"
	// CleanClose: the previous process closed the journal.
	CleanClose CloseState = "clean"
	// UncleanClose: the previous process died with the journal open
	// (badger's pid file was left behind). Badger replays its logs; nothing
	// committed is lost.
	UncleanClose CloseState = "unclean"
)

// PreviousClose is what Open found about the previous process.
type PreviousClose struct {
	State CloseState
	PID   int // the previous holder's pid, when UncleanClose and known
}

// Journal is an open journal. All methods are safe for concurrent use.
type Journal struct {
	opts Options
	db   *badger.DB
	log  zerolog.Logger
	prev PreviousClose

	// mu guards closed; readers and writers hold it shared so that Close
	// waits for calls in flight before closing badger.
	mu     sync.RWMutex
	closed bool
	// intentMu serialises read-modify-write of non-event records.
	intentMu sync.Mutex

	// unsynced: the disk failed a write and resync has not yet put the
	// memory table on disk (writefail.go); resyncMu serialises resync and
	// guards flushFailed (set when writing the memory table out failed:
	// the journal then refuses writes until a restart). Every commit holds
	// writeMu shared; resync holds it while badger blocks writes.
	unsynced    atomic.Bool
	resyncMu    sync.Mutex
	flushFailed error
	writeMu     sync.RWMutex

	events  *eventLog
	space   *space
	closing chan struct{} // closed by Close: stops background loops
	bg      sync.WaitGroup

	// compaction is driven by writes (compact.go).
	compact *compactor

	stats struct {
		gcPasses, gcRewrites, pruned, compactions atomic.Uint64
	}
}

// Open opens (or creates) the journal in opts.Dir. It fails with a
// *LockedError (errors.Is ErrLocked) when another process, or another
// Journal in this process, has the directory open.
func Open(opts Options) (*Journal, error) {
	if opts.Dir == "" {
		return nil, invalid("dir", "empty")
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal %s: %w", opts.Dir, err)
	}
	if err := probeLock(opts.Dir); err != nil {
		return nil, err
	}
	prev := previousClose(opts.Dir)
	if opts.Previous != nil {
		prev = *opts.Previous
	}
	bo := badgerOptions(opts)
	db, err := badger.Open(bo)
	if err != nil {
		if lerr := probeLock(opts.Dir); lerr != nil {
			return nil, lerr
		}
		return nil, fmt.Errorf("journal %s: open: %w", opts.Dir, err)
	}
	j := &Journal{
		opts:    opts,
		db:      db,
		log:     opts.Logger.With().Str("component", "journal").Logger(),
		prev:    prev,
		closing: make(chan struct{}),
		space:   &space{dir: opts.Dir, reserve: opts.Reserve, statfs: unix.Statfs},
		compact: newCompactor(),
	}
	if opts.Reserve == 0 {
		j.space.reserve = defaultReserve(bo.MemTableSize, bo.ValueLogFileSize)
	}
	// What the last process left in level 0 (and the memtables its logs
	// replayed) is compacted at the first pass.
	j.compact.wrote()
	ev, err := openEventLog(j, bo.MemTableSize)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("journal %s: %w", opts.Dir, err)
	}
	j.events = ev
	j.bg.Add(1)
	go j.maintain()
	j.log.Debug().Str("dir", opts.Dir).Str("previous_close", string(prev.State)).
		Uint64("last_event_seq", ev.visible.Load()).Msg("journal opened")
	return j, nil
}

// Badger's file sizes for a node's journal: badger's defaults are sized
// for servers (64 MiB memtables, 256 MiB cache, 1 GiB value logs).
const (
	defaultMemTable = 16 << 20
	defaultValueLog = 64 << 20
)

func badgerOptions(o Options) badger.Options {
	bo := badger.DefaultOptions(o.Dir).
		WithLogger(badgerLogger{l: o.Logger.With().Str("component", "badger").Logger()}).
		WithSyncWrites(!o.NoSync).
		WithMetricsEnabled(false).
		// Writers never race on a key: non-event writes are serialised by
		// intentMu, event keys are written only by the committer.
		WithDetectConflicts(false).
		// A node's journal is small; badger's defaults are sized for
		// servers (64 MiB memtables, 256 MiB cache, 1 GiB value logs).
		WithMemTableSize(defaultMemTable).
		WithNumMemtables(2).
		WithBlockCacheSize(8 << 20).
		// No compactors of badger's own: each wakes every 50ms to score
		// the levels, 40 wake-ups a second in an idle daemon. The journal
		// compacts on its own timer, armed by writes (compact.go).
		WithNumCompactors(0).
		WithValueLogFileSize(defaultValueLog).
		// Events and intents stay in the LSM tree; large rendered
		// definitions go to the value log, which GC reclaims.
		WithValueThreshold(32 << 10).
		// Damage found while running is an error, not garbage: every
		// block read from disk and every value read from the value log
		// is checked against its checksum.
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true)
	if o.nativeCompactors > 0 {
		bo = bo.WithNumCompactors(o.nativeCompactors)
	}
	if o.small {
		bo = bo.WithMemTableSize(2 << 20).WithValueLogFileSize(2 << 20).WithBlockCacheSize(1 << 20).
			// Tests damage one table among several: keep every flushed
			// memtable its own L0 table, whatever the compactors' timing
			// (a compaction on close once merged them all into one).
			WithCompactL0OnClose(false).
			WithNumLevelZeroTables(64).
			WithNumLevelZeroTablesStall(128)
	}
	if o.l0Tables > 0 {
		bo = bo.WithNumLevelZeroTables(o.l0Tables)
	}
	return bo
}

// PreviousClose reports how the previous process left the journal.
func (j *Journal) PreviousClose() PreviousClose { return j.prev }

// Dir is the journal's directory.
func (j *Journal) Dir() string { return j.opts.Dir }

// Close stops the background loops and subscriptions, commits events
// already queued, and closes badger (which releases the directory lock).
// It is safe to call more than once.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.mu.Unlock()

	close(j.closing)
	j.bg.Wait()
	j.events.stop()
	if err := j.db.Close(); err != nil {
		return fmt.Errorf("journal %s: close: %w", j.opts.Dir, err)
	}
	j.log.Debug().Str("dir", j.opts.Dir).Msg("journal closed")
	return nil
}

// Stats are counters for status and tests.
type Stats struct {
	LastSeq       uint64 // last durable event sequence number
	GCPasses      uint64 // background value-log GC passes run
	GCRewrites    uint64 // value-log files rewritten by GC
	EventsPruned  uint64 // events removed by retention since Open
	Compactions   uint64 // compaction passes that compacted (compact.go)
	PreviousClose CloseState
}

func (j *Journal) Stats() Stats {
	return Stats{
		LastSeq:       j.events.visible.Load(),
		GCPasses:      j.stats.gcPasses.Load(),
		GCRewrites:    j.stats.gcRewrites.Load(),
		EventsPruned:  j.stats.pruned.Load(),
		Compactions:   j.stats.compactions.Load(),
		PreviousClose: j.prev.State,
	}
}

// probeLock tries badger's own lock (flock on the directory) and releases
// it at once: a clear, typed error instead of badger's string.
func probeLock(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal %s: %w", dir, err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return &LockedError{Dir: dir, PID: lockPID(dir)}
	}
	if err != nil {
		return fmt.Errorf("journal %s: lock: %w", dir, err)
	}
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// lockPID reads the pid badger writes to DIR/LOCK; 0 if unknown.
func lockPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// ReadPreviousClose says how the previous process left the journal in
// dir, without opening it.
func ReadPreviousClose(dir string) PreviousClose { return previousClose(dir) }

// previousClose: badger deletes its pid file (LOCK) on a clean close, so a
// pid file found before opening means the previous holder died.
func previousClose(dir string) PreviousClose {
	if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); err != nil {
		return PreviousClose{State: FirstOpen}
	}
	if _, err := os.Stat(filepath.Join(dir, "LOCK")); err == nil {
		return PreviousClose{State: UncleanClose, PID: lockPID(dir)}
	}
	return PreviousClose{State: CleanClose}
}

// read runs fn in a read transaction, refusing once closed.
func (j *Journal) read(fn func(txn *badger.Txn) error) error {
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return ErrClosed
	}
	return j.db.View(fn)
}

// update runs fn in a write transaction, serialised with other non-event
// writes, and commits it synced (badger SyncWrites) before returning.
func (j *Journal) update(fn func(txn *writeTxn) error) error {
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return ErrClosed
	}
	j.intentMu.Lock()
	defer j.intentMu.Unlock()
	if err := j.space.check(); err != nil {
		return err
	}
	if err := j.resync(); err != nil {
		return err
	}
	j.writeMu.RLock()
	defer j.writeMu.RUnlock()
	j.compact.wrote()
	txn := j.newWrite()
	defer txn.Discard()
	if err := fn(txn); err != nil {
		return err
	}
	return j.commit(txn)
}

// SpaceShort reports whether the last write found less free space than
// the journal's reserve (it refuses writes until there is room again).
func (j *Journal) SpaceShort() bool { return j.space.short.Load() }

// getJSON decodes the value at key into v; found is false when absent.
func getJSON(txn reader, key []byte, v any) (found bool, err error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = item.Value(func(b []byte) error { return json.Unmarshal(b, v) })
	if err != nil {
		return false, decodeError(key, err)
	}
	return true, nil
}

func setJSON(txn *writeTxn, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return txn.Set(key, b)
}

// eachJSON calls fn with every key under prefix and its raw value, in key
// order.
func eachJSON(txn reader, prefix string, fn func(key, val []byte) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		err := item.Value(func(b []byte) error { return fn(item.Key(), b) })
		if err != nil {
			return err
		}
	}
	return nil
}

// listJSON decodes every record under prefix.
func listJSON[T any](j *Journal, prefix string) ([]T, error) {
	var out []T
	err := j.read(func(txn *badger.Txn) error {
		return eachJSON(txn, prefix, func(key, val []byte) error {
			var v T
			if err := json.Unmarshal(val, &v); err != nil {
				return decodeError(key, err)
			}
			out = append(out, v)
			return nil
		})
	})
	return out, err
}

// deletePrefix deletes every key under prefix inside txn.
func deletePrefix(txn *writeTxn, prefix string) error {
	var keys [][]byte
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
	for it.Rewind(); it.Valid(); it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Record is one raw key/value pair, for inspection (`engenho why`, tests).
type Record struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Walk calls fn with every record whose key starts with prefix ("" = all),
// in key order. The value is a copy and may be kept.
func (j *Journal) Walk(prefix string, fn func(Record) error) error {
	return j.read(func(txn *badger.Txn) error {
		return eachJSON(txn, prefix, func(key, val []byte) error {
			return fn(Record{Key: string(key), Value: append(json.RawMessage(nil), val...)})
		})
	})
}
