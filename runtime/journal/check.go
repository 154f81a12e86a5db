package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// CheckReport is what Check read.
type CheckReport struct {
	Tables  int           `json:"tables"`
	Logs    int           `json:"logs"`
	Records int           `json:"records"`
	Took    time.Duration `json:"took_ns"`
}

// Check proves that the journal in opts.Dir opens, and reads back, before
// the daemon hands it to badger for good (REL-5). It reads every file
// badger trusts (MANIFEST, key registry, tables, logs) read-only first,
// checks that the directory and its files can be written, then opens the
// journal the way Open does, reads every record's value back and checks
// it is the JSON the journal wrote, and closes it.
//
// Damage is a *DamageError (errors.Is ErrCorrupt or ErrUnwritable) naming
// the file. A directory that does not exist yet is fine. Anything else
// (a full disk, the journal locked) is a plain error.
//
// Check may still crash the process: badger panics in goroutines of its
// own on damage the read-only checks did not foresee. The daemon runs it
// in a child process (CheckMain, RunCheck).
func Check(opts Options) (CheckReport, error) {
	start := time.Now()
	rep, err := check(opts, nil)
	rep.Took = time.Since(start)
	return rep, err
}

// SalvageReport says what Salvage kept and skipped.
type SalvageReport struct {
	CheckReport
	// Kept counts the records handed over, by record type ("desired",
	// "stopped", ...).
	Kept map[string]int `json:"kept,omitempty"`
	// Skipped lists records whose value did not read back.
	Skipped []string `json:"skipped,omitempty"`
}

// Salvage reads what can be trusted from a journal (`reinit journal`):
// when every file passes the read-only checks, it opens the journal and
// hands keep every record but events and boot attempts (history, not
// intents), skipping records whose value does not read back. When a file
// is damaged, nothing is trusted: badger cannot say which records that
// file held, and replaying the rest could bring back an older value of a
// record the damaged file had replaced (a stop already lifted, an older
// revision). It then returns the damage and hands over nothing.
//
// Salvage opens the journal read-write (badger cannot open a journal a
// crash left open read-only): it may cut a torn log tail and delete
// tables a crash left behind, as an Open would.
func Salvage(opts Options, keep func(Record)) (SalvageReport, error) {
	start := time.Now()
	rep := SalvageReport{Kept: map[string]int{}}
	var err error
	rep.CheckReport, err = check(opts, func(r Record, bad error) {
		if bad != nil {
			rep.Skipped = append(rep.Skipped, r.Key)
			return
		}
		if kind := recordKind(r.Key); kind != "event" && kind != "boot" {
			rep.Kept[kind]++
			keep(r)
		}
	})
	rep.Took = time.Since(start)
	return rep, err
}

// recordKind is the record type of a key: "desired" for v1/desired/web.
func recordKind(key string) string {
	kind, _, _ := strings.Cut(strings.TrimPrefix(key, keyVersion), "/")
	return kind
}

// check is Check, and Salvage when salvage is set: then a record whose
// value does not read back is reported to salvage, not an error.
func check(opts Options, salvage func(Record, error)) (CheckReport, error) {
	var rep CheckReport
	if opts.Dir == "" {
		return rep, invalid("dir", "empty")
	}
	opts = opts.withDefaults()
	dir := opts.Dir
	fi, err := os.Stat(dir) // a symbolic link to the journal's disk is fine
	if errors.Is(err, os.ErrNotExist) {
		return rep, nil // Open creates it
	}
	if err != nil {
		return rep, fileError(dir, dir, err)
	}
	if !fi.IsDir() {
		return rep, damaged(dir, dir, "is not a directory (%s)", fileKind(fi.Mode()))
	}
	if err := probeLock(dir); err != nil {
		return rep, err
	}
	if rep.Tables, rep.Logs, err = checkFiles(dir); err != nil {
		return rep, err
	}
	if err := checkWritable(dir); err != nil {
		return rep, err
	}
	// The open below may add a value log: name the ones there were.
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	db, err := badger.Open(badgerOptions(opts).WithChecksumVerificationMode(options.OnTableAndBlockRead))
	if err != nil {
		if lerr := probeLock(dir); lerr != nil {
			return rep, lerr
		}
		return rep, damaged(dir, "", "badger cannot open it: %v", err)
	}
	rep.Records, err = readBack(dir, vlogs, db, salvage)
	if cerr := db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("journal %s: close after the check: %w", dir, cerr)
	}
	return rep, err
}

func fileKind(m os.FileMode) string {
	if m.IsRegular() {
		return "a regular file"
	}
	return "mode " + m.Type().String()
}

// checkWritable proves the directory and every file in it can be written:
// badger creates a log at each open and writes to the others.
func checkWritable(dir string) error {
	probe, err := os.CreateTemp(dir, ".engenho-check-*")
	if err != nil {
		return writeError(dir, dir, err)
	}
	name := probe.Name()
	_, err = probe.Write([]byte("engenho journal check\n"))
	if err == nil {
		err = probe.Sync()
	}
	probe.Close()
	if rerr := os.Remove(name); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return writeError(dir, dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fileError(dir, dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return writeError(dir, path, err)
		}
		f.Close()
	}
	return nil
}

// writeError classifies a failed write: no permission or a read-only
// filesystem is the journal being unwritable; a full disk is not damage.
func writeError(dir, path string, err error) error {
	switch {
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EPERM):
		return &DamageError{Kind: DamageUnwritable, Dir: dir, File: path, Reason: fmt.Sprintf("cannot be written: %v", unwrapPath(err))}
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("journal %s: %w", path, err)
	}
	return damaged(dir, path, "cannot be written: %v", unwrapPath(err))
}

// readBack reads every record's latest value and checks it is JSON, as
// every value the journal writes is. Badger does not always say when a
// value cannot be read: a missing or zeroed value log reads back empty.
func readBack(dir string, vlogs []string, db *badger.DB, salvage func(Record, error)) (int, error) {
	n := 0
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			key := string(item.Key())
			val, err := item.ValueCopy(nil)
			if err == nil && !json.Valid(val) {
				err = fmt.Errorf("%d bytes that are not JSON", len(val))
				if len(val) == 0 && item.ValueSize() > 0 {
					err = fmt.Errorf("nothing, badger expected %d bytes", item.ValueSize())
				}
			}
			n++
			if salvage != nil {
				salvage(Record{Key: key, Value: val}, err)
				continue
			}
			if err != nil {
				file, where := valueLogOf(vlogs)
				return damaged(dir, file, "record %s reads back %v: its value in %s is missing or damaged", key, err, where)
			}
		}
		return nil
	})
	return n, err
}

// valueLogOf names where a value that does not read back lives: the one
// value log, or the directory when there are several or none is left.
func valueLogOf(vlogs []string) (file, where string) {
	switch len(vlogs) {
	case 0:
		return "", "the value log (no *.vlog file is left)"
	case 1:
		return vlogs[0], "the value log " + filepath.Base(vlogs[0])
	}
	return "", fmt.Sprintf("one of the %d value logs", len(vlogs))
}
