package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix starts the name of every temporary file a marker write makes.
const tempPrefix = ".tmp-"

// writeFileAtomic replaces dir/name with data: a temp file in the same
// directory, fsync, rename over the old file, fsync of the directory. A
// crash at any point leaves the old content or the new, never a mix.
func writeFileAtomic(dir, name string, data []byte) (err error) {
	tmp, err := os.CreateTemp(dir, tempPrefix+name+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

// removeFileDurably removes dir/name (absent is fine) and fsyncs dir.
func removeFileDurably(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so a rename or removal in it is durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// removeStaleTemps drops temp files a crashed marker write left in
// DATA/control (only this package's own temp files; best effort).
func (d *Dir) removeStaleTemps() {
	entries, err := os.ReadDir(d.Control())
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) && e.Type().IsRegular() {
			os.Remove(filepath.Join(d.Control(), e.Name()))
		}
	}
}
