package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// The files of a badger directory that Check reads before badger does.
// Badger trusts them: a damaged table footer panics in one of its own
// goroutines (upstream issues 2201 and 1797), a MANIFEST cut short makes
// it delete the tables it no longer names, a log damaged in the middle is
// cut at the damage as if it were a torn write. None of that may happen
// to the journal silently, so each file is checked here first, read-only.
const (
	manifestName    = badger.ManifestFilename
	keyRegistryName = "KEYREGISTRY"
	// keyRegistryHeader: a 16-byte IV, then the sanity text, stored in the
	// clear when the journal is not encrypted (it never is).
	keyRegistrySanity = "Hello Badger"
)

// dirFiles is what a journal directory holds.
type dirFiles struct {
	dir         string
	manifest    bool
	keyRegistry bool
	tables      map[uint64]string // table id -> path
	wals        []string          // *.mem: write-ahead logs of memtables
	vlogs       []string          // *.vlog: value logs
}

func (f dirFiles) data() int { return len(f.tables) + len(f.wals) + len(f.vlogs) }

func listDir(dir string) (dirFiles, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return dirFiles{}, fileError(dir, dir, err)
	}
	f := dirFiles{dir: dir, tables: map[uint64]string{}}
	for _, e := range entries {
		name, path := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case name == manifestName:
			f.manifest = true
		case name == keyRegistryName:
			f.keyRegistry = true
		case strings.HasSuffix(name, ".sst"):
			id, ok := table.ParseFileID(name)
			if !ok {
				return f, damaged(dir, path, "is not a table badger wrote (bad name)")
			}
			f.tables[id] = path
		case strings.HasSuffix(name, ".mem"):
			f.wals = append(f.wals, path)
		case strings.HasSuffix(name, ".vlog"):
			f.vlogs = append(f.vlogs, path)
		default:
			continue
		}
		if !e.Type().IsRegular() {
			return f, damaged(dir, path, "is not a regular file")
		}
	}
	sort.Strings(f.wals)
	sort.Strings(f.vlogs)
	return f, nil
}

// checkFiles runs every read-only check; it returns the number of tables
// and logs it read.
func checkFiles(dir string) (tables, logs int, err error) {
	f, err := listDir(dir)
	if err != nil {
		return 0, 0, err
	}
	if !f.manifest {
		if f.data() > 0 {
			return 0, 0, damaged(dir, filepath.Join(dir, manifestName), "is missing, but the directory holds %d data files", f.data())
		}
		return 0, 0, nil // nothing written yet
	}
	man, err := readManifest(dir)
	if err != nil {
		return 0, 0, err
	}
	if f.keyRegistry {
		if err := checkKeyRegistry(dir); err != nil {
			return 0, 0, err
		}
	}
	walMin, err := checkLogs(dir, f)
	if err != nil {
		return 0, 0, err
	}
	if err := checkTables(dir, f, man, walMin); err != nil {
		return 0, 0, err
	}
	return len(f.tables), len(f.wals) + len(f.vlogs), nil
}

// readManifest parses the MANIFEST read-only. A torn last change (a crash
// while appending) is what badger itself tolerates; anything else that
// does not parse is damage.
func readManifest(dir string) (badger.Manifest, error) {
	path := filepath.Join(dir, manifestName)
	fp, err := os.Open(path)
	if err != nil {
		return badger.Manifest{}, fileError(dir, path, err)
	}
	defer fp.Close()
	man, _, err := badger.ReplayManifestFile(fp, 0, badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return badger.Manifest{}, damaged(dir, path, "unreadable: %v", err)
	}
	return man, nil
}

func checkKeyRegistry(dir string) error {
	path := filepath.Join(dir, keyRegistryName)
	b, err := os.ReadFile(path)
	if err != nil {
		return fileError(dir, path, err)
	}
	if len(b) < 16+len(keyRegistrySanity) || string(b[16:16+len(keyRegistrySanity)]) != keyRegistrySanity {
		return damaged(dir, path, "damaged: its header is not badger's (%d bytes)", len(b))
	}
	return nil
}

// checkTables opens every table read-only and verifies every block's
// checksum. Each table the MANIFEST names must be there. A table it does
// not name is left over by a flush or a compaction that a crash cut short
// (badger deletes it), unless it holds data newer than every named table
// that no write-ahead log still holds: then the MANIFEST lost changes, and
// badger would delete the only copy.
func checkTables(dir string, f dirFiles, man badger.Manifest, walMin uint64) error {
	var newest uint64
	ids := make([]uint64, 0, len(man.Tables))
	for id := range man.Tables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		path, ok := f.tables[id]
		if !ok {
			return damaged(dir, filepath.Join(dir, table.IDToFilename(id)), "is named by the MANIFEST but missing")
		}
		v, err := checkTable(dir, path, man.Tables[id].Compression)
		if err != nil {
			return err
		}
		newest = max(newest, v)
	}
	for id, path := range f.tables {
		if _, named := man.Tables[id]; named {
			continue
		}
		v, err := checkTable(dir, path, options.Snappy)
		if err != nil {
			return err
		}
		if v > newest && (walMin == 0 || walMin > v) {
			return damaged(dir, filepath.Join(dir, manifestName), "lost changes: it does not name %s, which holds records no other file has (up to version %d)",
				filepath.Base(path), v)
		}
	}
	return nil
}

// checkTable opens one table read-only and verifies all its blocks. A
// table badger cannot parse makes it panic (initIndex, block decoding), in
// this goroutine: the panic is caught here and is the damage.
func checkTable(dir, path string, compression options.CompressionType) (maxVersion uint64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, fileError(dir, path, err)
	}
	if fi.Size() == 0 {
		return 0, damaged(dir, path, "is empty")
	}
	fd, err := os.Open(path)
	if err != nil {
		return 0, fileError(dir, path, err)
	}
	mf, err := z.OpenMmapFileUsing(fd, 0, false)
	if err != nil {
		fd.Close()
		return 0, fileError(dir, path, err)
	}
	defer func() {
		if r := recover(); r != nil {
			maxVersion, err = 0, damaged(dir, path, "table is damaged: its index or a block does not decode (%s)", panicLine(r))
		}
		_ = mf.Close(-1)
	}()
	// NoVerification: OpenTable then never closes mf itself; VerifyChecksum
	// below checks every block.
	t, err := table.OpenTable(mf, table.Options{ReadOnly: true, ChkMode: options.NoVerification,
		Compression: compression, BlockSize: 4 << 10, BloomFalsePositive: 0.01})
	if err != nil {
		return 0, damaged(dir, path, "table is damaged: it does not open (%v)", err)
	}
	if err := t.VerifyChecksum(); err != nil {
		return 0, damaged(dir, path, "table is damaged: %v", err)
	}
	return t.MaxVersion(), nil
}

// panicLine is the first line of a recovered panic value.
func panicLine(r any) string {
	s := strings.TrimSpace(fmt.Sprint(r))
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "==") {
			return line
		}
	}
	return "badger panicked reading it"
}

// fileError classifies a failure to read one of the journal's files.
func fileError(dir, path string, err error) error {
	if errors.Is(err, os.ErrPermission) {
		return &DamageError{Kind: DamageUnwritable, Dir: dir, File: path, Reason: fmt.Sprintf("cannot be read: %v", unwrapPath(err))}
	}
	if errors.Is(err, os.ErrNotExist) {
		return damaged(dir, path, "vanished while it was checked")
	}
	return damaged(dir, path, "cannot be read: %v", unwrapPath(err))
}

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
