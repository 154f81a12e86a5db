package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrNotAtticable is returned for a name MoveToAttic does not know (SEC-3).
var ErrNotAtticable = errors.New("not a name reinit can move aside")

// atticable maps each name reinit may move aside to its path under DATA.
// This fixed list is the only way a reinit name reaches a path (SEC-3).
var atticable = map[string]string{
	"journal":  "journal",
	"identity": "control/" + identityName,
}

// Atticable lists the names MoveToAttic accepts, sorted.
func Atticable() []string {
	names := make([]string, 0, len(atticable))
	for n := range atticable {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// atticStamp is the attic's directory name format: sortable, no colons.
const atticStamp = "20060102T150405.000Z"

// MoveToAttic moves the thing named what (one of Atticable) to
// DATA/attic/TIMESTAMP/<its path> by rename (DMN-14). Nothing is deleted or
// overwritten: if the destination exists, the timestamp gets a -1, -2, ...
// suffix. The source must exist and be on the data directory's filesystem.
// It returns the destination path.
func (d *Dir) MoveToAttic(what string) (string, error) {
	if err := d.requireLock(); err != nil {
		return "", err
	}
	rel, ok := atticable[what]
	if !ok {
		return "", fmt.Errorf("datadir %s: reinit %q (allowed: %v): %w", d.root, what, Atticable(), ErrNotAtticable)
	}
	src := filepath.Join(d.root, rel)
	if _, err := os.Lstat(src); err != nil {
		return "", fmt.Errorf("datadir %s: reinit %s: %w", d.root, what, err)
	}
	stamp := d.clock.Now().UTC().Format(atticStamp)
	for n := 0; ; n++ {
		name := stamp
		if n > 0 {
			name += "-" + strconv.Itoa(n)
		}
		dest := filepath.Join(d.Attic(), name, rel)
		err := d.moveOnce(src, dest)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("datadir %s: reinit %s: %w", d.root, what, err)
		}
		return dest, nil
	}
}

// moveOnce renames src to dest, failing with os.ErrExist if dest exists,
// and makes the move durable.
func (d *Dir) moveOnce(src, dest string) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return err
	}
	if err := renameNoReplace(src, dest); err != nil {
		return err
	}
	// Every directory from dest's parent up to DATA may have a new entry,
	// and src's parent lost one.
	dirs := []string{filepath.Dir(src)}
	for p := filepath.Dir(dest); p != d.root && len(p) > len(d.root); p = filepath.Dir(p) {
		dirs = append(dirs, p)
	}
	dirs = append(dirs, d.root)
	slices.Sort(dirs)
	for _, dir := range slices.Compact(dirs) {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// renameNoReplace renames without ever replacing dest (renameat2
// RENAME_NOREPLACE); on a filesystem without it, it checks first, which is
// safe here because only the lock holder moves things into the attic.
func renameNoReplace(src, dest string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dest, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return os.ErrExist
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		if _, err := os.Lstat(dest); err == nil {
			return os.ErrExist
		}
		return os.Rename(src, dest)
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s and %s are on different filesystems; move it by hand (nothing is copied or deleted): %w", src, dest, err)
	}
	return &os.LinkError{Op: "rename", Old: src, New: dest, Err: err}
}
