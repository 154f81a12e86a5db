package sqlitesnap

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Header is the first 16 bytes of every SQLite 3 database file.
const Header = "SQLite format 3\x00"

// BusyTimeout is how long Copy waits for a writer's lock before it fails.
const BusyTimeout = 10 * time.Second

// ErrSnapshot: a database could not be copied consistently (locked past
// BusyTimeout, unreadable, or not really a database). Nothing was written
// at the destination.
var ErrSnapshot = errors.New("sqlite snapshot failed")

// Sidecars are the suffixes of the files SQLite keeps beside a database
// (rollback journal, write-ahead log, its shared-memory index). A snapshot
// folds their committed content into the copy, so they are not shipped.
var Sidecars = []string{"-wal", "-shm", "-journal"}

// Is reports whether the open file starts with the SQLite 3 header. It
// reads from offset 0 without moving f's offset.
func Is(f io.ReaderAt) bool {
	var b [len(Header)]byte
	n, _ := f.ReadAt(b[:], 0)
	return n == len(b) && bytes.Equal(b[:], []byte(Header))
}

// Copy writes a consistent snapshot of the database at src to dst (which
// must not exist). It opens src through SQLite, so a writer's transaction
// in progress, a hot journal or an uncheckpointed WAL are all handled the
// way SQLite itself handles them: the copy holds exactly the transactions
// committed when it began.
func Copy(ctx context.Context, src, dst string) error {
	dsn := (&url.URL{Scheme: "file", OmitHost: true, Path: src,
		RawQuery: "_pragma=" + url.QueryEscape(fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSnapshot, src, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		os.Remove(dst)
		return fmt.Errorf("%w: %s: %w", ErrSnapshot, src, err)
	}
	return nil
}
