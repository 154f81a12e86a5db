package checkpoint

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrChanged: a file changed size while it was being archived; checkpoint
// a quiescent directory, or try again.
var ErrChanged = errors.New("file changed while archiving")

// tarMode is the Unix mode kept in the archive: permission bits and the
// sticky bit. Setuid and setgid are dropped on purpose (restored data must
// not grant privileges).
func tarMode(m fs.FileMode) int64 {
	mode := int64(m & fs.ModePerm)
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// fileMode is the inverse of tarMode, for os.Chmod.
func fileMode(mode int64) fs.FileMode {
	m := fs.FileMode(mode) & fs.ModePerm
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// packStats counts what an archive holds.
type packStats struct {
	files    int   // entries written (files, dirs, symlinks)
	unpacked int64 // bytes of regular file content
	skipped  int   // sockets and named pipes left out
}

// pack writes dir as a tar stream to w: the root as ".", then every
// directory, regular file and symlink below it in lexical order, with
// permission bits and modification times. Owners are not kept. Sockets
// and named pipes are skipped; device files are refused.
func pack(ctx context.Context, dir string, w io.Writer) (packStats, error) {
	var st packStats
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		return packEntry(tw, path, filepath.ToSlash(rel), d, &st)
	})
	if err != nil {
		return st, err
	}
	return st, tw.Close()
}

func packEntry(tw *tar.Writer, path, name string, d fs.DirEntry, st *packStats) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	hdr := &tar.Header{
		Name: name, Mode: tarMode(info.Mode()), ModTime: info.ModTime(),
		Format: tar.FormatPAX,
	}
	switch mode := info.Mode(); {
	case mode.IsDir():
		hdr.Typeflag = tar.TypeDir
		if name != "." {
			hdr.Name += "/"
		}
	case mode.IsRegular():
		return packFile(tw, path, hdr, st)
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, target, 0o777
	case mode&(fs.ModeSocket|fs.ModeNamedPipe) != 0:
		st.skipped++
		return nil
	default:
		return fmt.Errorf("%s: cannot checkpoint a %s", name, mode.Type())
	}
	st.files++
	return tw.WriteHeader(hdr)
}

// openRegular opens path and stats the open file, not the path, so that
// a rename under our feet cannot mix two files. A path that is no longer a
// regular file is ErrChanged; name is how the error names it.
func openRegular(path, name string) (*os.File, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w (no longer a regular file)", name, ErrChanged)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// packFile writes one regular file, sized from the open file.
func packFile(tw *tar.Writer, path string, hdr *tar.Header, st *packStats) error {
	f, info, err := openRegular(path, hdr.Name)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr.Typeflag, hdr.Size, hdr.ModTime = tar.TypeReg, info.Size(), info.ModTime()
	hdr.Mode = tarMode(info.Mode())
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
	if err != nil {
		return err
	}
	if n != hdr.Size {
		return fmt.Errorf("%s: %w (shrank from %d to %d bytes)", hdr.Name, ErrChanged, hdr.Size, n)
	}
	st.files++
	st.unpacked += n
	return nil
}
