package sqlitesnap_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/engenho/engenho/drivers/sqlitesnap"
)

func open(t *testing.T, path, mode string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode("+mode+")")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func integrity(t *testing.T, path string) (string, int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return res, n
}

// ACT-16: Is tells a database by its header, and Copy takes consistent
// snapshots while a writer commits continuously, in WAL and rollback
// journal modes; every copy passes integrity_check and holds whole
// transactions only (each transaction inserts 10 rows).
func TestACT16CopyUnderWriter(t *testing.T) {
	for _, mode := range []string{"wal", "delete"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "app.db")
			db := open(t, src, mode)
			if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, pad TEXT)"); err != nil {
				t.Fatal(err)
			}
			if !isFile(t, src) {
				t.Fatal("Is: a database not recognised")
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			var commits atomic.Int64
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					tx, err := db.Begin()
					if err != nil {
						continue
					}
					for i := 0; i < 10; i++ {
						tx.Exec("INSERT INTO t (pad) VALUES (?)", strings.Repeat("x", 500))
					}
					if tx.Commit() == nil {
						commits.Add(1)
					}
				}
			}()
			last := -1
			for i := 0; i < 8; i++ {
				dst := filepath.Join(dir, fmt.Sprintf("copy-%d.db", i))
				if err := sqlitesnap.Copy(context.Background(), src, dst); err != nil {
					t.Fatal(err)
				}
				res, n := integrity(t, dst)
				if res != "ok" || n%10 != 0 || n < last {
					t.Fatalf("copy %d: integrity %q, %d rows (last copy %d)", i, res, n, last)
				}
				last = n
			}
			stop.Store(true)
			wg.Wait()
			if commits.Load() == 0 {
				t.Fatal("the writer never committed")
			}
		})
	}
}

// ACT-16: a file that is not a database is neither recognised nor copied.
func TestACT16NotADatabase(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "plain")
	os.WriteFile(src, []byte("SQLite format 2 but not really, just text that is long enough"), 0o600)
	if isFile(t, src) {
		t.Fatal("a text file taken for a database")
	}
	err := sqlitesnap.Copy(context.Background(), src, filepath.Join(dir, "dst"))
	if !errors.Is(err, sqlitesnap.ErrSnapshot) {
		t.Fatalf("copy of a text file: %v, want ErrSnapshot", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "dst")); serr == nil {
		t.Fatal("a failed copy left its destination")
	}
}

// isFile is sqlitesnap.Is for the file at path.
func isFile(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return sqlitesnap.Is(f)
}
