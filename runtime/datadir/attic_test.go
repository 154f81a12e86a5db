package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeJournal(t *testing.T, d *Dir, content string) {
	t.Helper()
	if err := os.MkdirAll(d.Journal(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Journal(), "000001.vlog"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMoveToAtticNeverDeletes: reinit journal moves DATA/journal to
// DATA/attic/TIMESTAMP/journal by rename; two moves at the same instant get
// distinct destinations and nothing is overwritten (DMN-14).
func TestMoveToAtticNeverDeletes(t *testing.T) {
	d, _ := openLocked(t)
	writeJournal(t, d, "first")
	dest1, err := d.MoveToAttic("journal")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(d.Attic(), "20260304T050607.008Z", "journal"); dest1 != want {
		t.Fatalf("dest %s, want %s", dest1, want)
	}
	if _, err := os.Stat(d.Journal()); !os.IsNotExist(err) {
		t.Fatalf("journal still in place: %v", err)
	}

	writeJournal(t, d, "second") // same fake instant
	dest2, err := d.MoveToAttic("journal")
	if err != nil {
		t.Fatal(err)
	}
	if dest2 == dest1 || !strings.HasSuffix(filepath.Dir(dest2), "-1") {
		t.Fatalf("second move went to %s (first %s)", dest2, dest1)
	}
	for dest, want := range map[string]string{dest1: "first", dest2: "second"} {
		got, err := os.ReadFile(filepath.Join(dest, "000001.vlog"))
		if err != nil || string(got) != want {
			t.Fatalf("%s holds %q, %v; want %q", dest, got, err, want)
		}
	}
}

// TestMoveToAtticAllowList: only listed names reach a path (SEC-3).
func TestMoveToAtticAllowList(t *testing.T) {
	d, _ := openLocked(t)
	writeJournal(t, d, "keep")
	for _, what := range []string{"", "../etc", "control", "journal/..", "/journal", "journal/000001.vlog", "Journal", "attic"} {
		if _, err := d.MoveToAttic(what); !errors.Is(err, ErrNotAtticable) {
			t.Errorf("%q: got %v, want ErrNotAtticable", what, err)
		}
	}
	if _, err := os.Stat(filepath.Join(d.Journal(), "000001.vlog")); err != nil {
		t.Fatalf("journal touched: %v", err)
	}
	if _, err := os.Stat(d.Attic()); !os.IsNotExist(err) {
		t.Fatalf("refused moves created the attic: %v", err)
	}
}

// TestAtticableEntriesStayInside: every allow-listed path is relative,
// clean and inside DATA, and not the control directory or the attic.
func TestAtticableEntriesStayInside(t *testing.T) {
	for _, name := range Atticable() {
		rel := atticable[name]
		if rel == "" || filepath.IsAbs(rel) || filepath.Clean(rel) != rel || strings.HasPrefix(rel, "..") ||
			rel == "control" || rel == "attic" || strings.HasPrefix(rel, "attic/") || strings.HasPrefix(rel, "control/lock") {
			t.Errorf("allow-list entry %s -> %q is not a safe subpath", name, rel)
		}
	}
}

func TestMoveToAtticMissingSource(t *testing.T) {
	d, _ := openLocked(t)
	if _, err := d.MoveToAttic("journal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want ErrNotExist", err)
	}
}

// TestRenameNoReplace: the rename never replaces an existing file.
func TestRenameNoReplace(t *testing.T) {
	dir := t.TempDir()
	src, dest := filepath.Join(dir, "src"), filepath.Join(dir, "dest")
	os.WriteFile(src, []byte("new"), 0o600)
	os.WriteFile(dest, []byte("old"), 0o600)
	if err := renameNoReplace(src, dest); !errors.Is(err, os.ErrExist) {
		t.Fatalf("got %v, want ErrExist", err)
	}
	if got, _ := os.ReadFile(dest); string(got) != "old" {
		t.Fatalf("dest replaced: %q", got)
	}
}
