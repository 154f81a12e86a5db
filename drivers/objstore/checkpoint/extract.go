package checkpoint

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// errBadArchive marks an archive that is not one pack would write.
var errBadArchive = errors.New("bad archive")

// pendingMode is a directory's mode and time, applied after its contents
// are written (a read-only directory would refuse them).
type pendingMode struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

// unpacker extracts one archive into a fresh directory, through an
// os.Root so no entry can reach outside it.
type unpacker struct {
	root     *os.Root
	limit    int64 // bytes of file content allowed
	written  int64
	files    int
	links    map[string]bool // symlinks made so far
	dirModes []pendingMode
	buf      []byte // copy buffer: large writes, few syscalls
}

// unpack reads a tar stream from r into dir (an existing empty
// directory), writing at most limit bytes of file content. Nothing is
// fsynced here: Restore makes the whole tree durable at once.
func unpack(ctx context.Context, r io.Reader, dir string, limit int64) (int, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	u := &unpacker{root: root, limit: limit, links: map[string]bool{}, buf: make([]byte, 1<<20)}
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return u.files, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return u.files, fmt.Errorf("%w: %w", errBadArchive, err)
		}
		if err := u.entry(hdr, tr); err != nil {
			if errors.Is(err, fs.ErrExist) {
				// dir starts empty: only the archive can have put it there.
				err = fmt.Errorf("%w: entry %q appears twice", errBadArchive, hdr.Name)
			}
			return u.files, err
		}
	}
	return u.files, u.finish()
}

// cleanName validates an entry name: relative, no "..", no NUL, no
// parent that is a symlink we made.
func (u *unpacker) cleanName(raw string) (string, error) {
	name := path.Clean(strings.TrimSuffix(raw, "/"))
	switch {
	case raw == "" || strings.ContainsRune(raw, 0):
		return "", fmt.Errorf("%w: entry name %q", errBadArchive, raw)
	case path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../"):
		return "", fmt.Errorf("%w: entry %q leaves the directory", errBadArchive, raw)
	}
	for p := path.Dir(name); p != "." && p != "/"; p = path.Dir(p) {
		if u.links[p] {
			return "", fmt.Errorf("%w: entry %q goes through symlink %q", errBadArchive, raw, p)
		}
	}
	return name, nil
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, err := u.cleanName(hdr.Name)
	if err != nil {
		return err
	}
	mode := fileMode(hdr.Mode)
	switch hdr.Typeflag {
	case tar.TypeDir:
		if name != "." {
			if err := u.root.Mkdir(name, 0o700); err != nil {
				return err
			}
		}
		u.dirModes = append(u.dirModes, pendingMode{name: name, mode: mode, mtime: hdr.ModTime})
	case tar.TypeReg:
		if err := u.file(name, hdr, r); err != nil {
			return err
		}
		if err := u.root.Chmod(name, mode); err != nil {
			return err
		}
		if err := u.root.Chtimes(name, hdr.ModTime, hdr.ModTime); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if name == "." {
			return fmt.Errorf("%w: root as a symlink", errBadArchive)
		}
		if err := u.root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
		u.links[name] = true
	default:
		return fmt.Errorf("%w: entry %q has type %q", errBadArchive, hdr.Name, hdr.Typeflag)
	}
	u.files++
	return nil
}

// file writes one regular file; O_EXCL refuses duplicates and anything
// already there.
func (u *unpacker) file(name string, hdr *tar.Header, r io.Reader) error {
	if hdr.Size < 0 || u.written+hdr.Size > u.limit {
		return fmt.Errorf("%w: file content beyond the %d bytes the manifest declares", errBadArchive, u.limit)
	}
	f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// Hide f's ReadFrom so the copy uses our large buffer.
	n, err := io.CopyBuffer(struct{ io.Writer }{f}, io.LimitReader(r, hdr.Size), u.buf)
	u.written += n
	if errors.Is(err, io.ErrUnexpectedEOF) || (err == nil && n != hdr.Size) {
		// The tar reader's word for an archive that ends inside a file.
		err = fmt.Errorf("%w: %s cut short at %d of its %d bytes", errBadArchive, name, n, hdr.Size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// finish applies directory modes and times, deepest first.
func (u *unpacker) finish() error {
	sort.Slice(u.dirModes, func(i, j int) bool { return depth(u.dirModes[i].name) > depth(u.dirModes[j].name) })
	for _, d := range u.dirModes {
		if err := u.root.Chmod(d.name, d.mode); err != nil {
			return err
		}
		if err := u.root.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

func depth(name string) int {
	if name == "." {
		return 0
	}
	return strings.Count(name, "/") + 1
}
