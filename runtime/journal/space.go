package journal

import (
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrNoSpace: the journal's file system has less free space than the
// journal keeps in reserve, so it refuses to write. The error is a
// *NoSpaceError. Nothing was written; free space and retry.
//
// Why a reserve: badger's write-ahead log (and its value log) are
// memory-mapped sparse files. Writing into a page the file system cannot
// back is not an error a call returns but a SIGBUS that kills the daemon
// (seen: the first event append after the disk filled). So the journal
// never lets a write reach badger when the room for the files it may grow
// before the next check is not there.
var ErrNoSpace = errors.New("journal: not enough free disk space")

// NoSpaceError says where, how much is free and how much is kept.
type NoSpaceError struct {
	Dir     string
	Free    int64
	Reserve int64
}

func (e *NoSpaceError) Error() string {
	return fmt.Sprintf("journal %s: %s free on its file system, below the %s it keeps in reserve: nothing was written; free space there and retry",
		e.Dir, mib(e.Free), mib(e.Reserve))
}

func (e *NoSpaceError) Is(target error) bool { return target == ErrNoSpace }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// defaultReserve is what badger may grow before the next write is checked:
// a new write-ahead log (mapped at twice the memtable), a value-log file,
// and room for a memtable flush.
func defaultReserve(memTable, valueLog int64) int64 {
	if memTable == defaultMemTable && valueLog == defaultValueLog {
		return DefaultReserve
	}
	return 3*memTable + valueLog
}

// space checks the free space of the journal's file system against the
// reserve before each write. Free space is read with statfs, a syscall
// per write (about a microsecond, beside a synced commit's milliseconds).
type space struct {
	dir     string
	reserve int64
	// statfs is unix.Statfs; tests replace it.
	statfs func(path string, st *unix.Statfs_t) error
	// short is set while the last check found too little space.
	short atomic.Bool
}

// check returns a *NoSpaceError when writing now could fill the disk.
func (s *space) check() error {
	if s == nil || s.reserve <= 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := s.statfs(s.dir, &st); err != nil {
		return nil // cannot tell: let the write go and fail on its own
	}
	free := int64(st.Bavail) * st.Bsize
	if free < s.reserve {
		s.short.Store(true)
		return &NoSpaceError{Dir: s.dir, Free: free, Reserve: s.reserve}
	}
	s.short.Store(false)
	return nil
}

// DefaultReserve is the reserve of a journal opened with the default
// badger sizes (Options.Reserve 0).
const DefaultReserve = 3*defaultMemTable + defaultValueLog

// CheckSpace says whether dir's file system has the journal's reserve
// free (reserve 0: DefaultReserve): a *NoSpaceError when it has not. The
// daemon asks before it checks or opens the journal, which writes too.
func CheckSpace(dir string, reserve int64) error {
	if reserve == 0 {
		reserve = DefaultReserve
	}
	return (&space{dir: dir, reserve: reserve, statfs: unix.Statfs}).check()
}
