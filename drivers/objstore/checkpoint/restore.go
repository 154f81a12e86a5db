package checkpoint

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Restore replaces dir with the current checkpoint of head: it extracts
// into a temporary sibling while hashing, verifies size and sha256, and
// only then renames the result into place. On any failure dir is left as
// it was. ErrNoCheckpoint means there is nothing to restore (a first
// boot); ErrCorrupt that the archive does not match its manifest entry.
// The tree is durable (synced) when Restore returns.
func (c *Checkpointer) Restore(ctx context.Context, head Head, dir string) (Stats, error) {
	st, settle, err := c.RestoreDeferred(ctx, head, dir)
	if err != nil {
		return st, err
	}
	return st, settle()
}

// RestoreDeferred is Restore without the wait for the disk: the verified
// tree is in place when it returns, and settle (run it after starting the
// instance, in any goroutine) syncs the file system and then writes the
// marker that makes Fresh true. A crash before settle finishes costs a
// restore at the next wake, never a half-synced tree taken as fresh.
func (c *Checkpointer) RestoreDeferred(ctx context.Context, head Head, dir string) (Stats, func() error, error) {
	began := c.cfg.Clock.Now()
	e := head.Manifest.Current
	if e == nil {
		return Stats{}, nil, fmt.Errorf("checkpoint %s: %w", head.Host, ErrNoCheckpoint)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Stats{}, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return Stats{}, nil, fmt.Errorf("checkpoint %s: %w", head.Host, err)
	}
	sweepLeftovers(dir)
	tmp, err := siblingName(dir, ".restore-")
	if err != nil {
		return Stats{}, nil, err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return Stats{}, nil, fmt.Errorf("checkpoint %s: %w", head.Host, err)
	}
	fetch := c.fetchInto
	if e.Format == Cas {
		fetch = func(ctx context.Context, e Entry, dir string) (int, error) {
			return c.casFetchInto(ctx, head.Host, e, dir)
		}
	}
	files, err := fetch(ctx, *e, tmp)
	if err == nil {
		err = c.dropMarker(dir)
	}
	if err == nil {
		err = swapIn(tmp, dir)
	}
	if err != nil {
		removeTree(tmp)
		return Stats{}, nil, fmt.Errorf("checkpoint %s: restoring %s: %w", head.Host, e.Key, err)
	}
	st := Stats{Key: e.Key, Bytes: e.Size, Unpacked: e.Unpacked, Files: files, Duration: c.cfg.Clock.Since(began)}
	settle := func() error {
		if !c.cfg.NoSync {
			if err := syncFS(dir); err != nil {
				return fmt.Errorf("checkpoint %s: syncing %s: %w", head.Host, dir, err)
			}
		}
		if err := writeMarker(dir, e.Key); err != nil {
			return fmt.Errorf("checkpoint %s: %w", head.Host, err)
		}
		return nil
	}
	return st, settle, nil
}

// dropMarker removes dir's marker, durably, before its tree is replaced:
// until settle writes it again, dir is not fresh.
func (c *Checkpointer) dropMarker(dir string) error {
	err := os.Remove(markerPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || c.cfg.NoSync {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// syncFS flushes the whole file system holding dir: one syncfs(2) instead
// of an fsync per restored file.
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

// fetchInto streams the archive into dir, then checks what it read
// against the entry. A mismatch is ErrCorrupt; a download that failed is
// its own error, whatever the extraction made of the bytes it got.
func (c *Checkpointer) fetchInto(ctx context.Context, e Entry, dir string) (int, error) {
	f := c.newFetcher(ctx, []target{{key: e.Key, size: e.Size, sha256: e.SHA256, crc32c: e.CRC32C, name: "archive"}})
	r := f.reader(0)
	files, err := c.extract(ctx, e, r, dir)
	if err != nil && ctx.Err() == nil {
		// Read to the end so the checksum can say whether the archive
		// or the disk was at fault.
		drain(r)
	}
	if err := f.finish(err); err != nil {
		return 0, err
	}
	return files, nil
}

// extract unpacks the archive from r, then reads what follows the tar
// end (padding, the gzip trailer) so the whole archive is hashed.
func (c *Checkpointer) extract(ctx context.Context, e Entry, r io.Reader, dir string) (int, error) {
	stream := r
	if e.Format == TarGz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		defer zr.Close()
		stream = zr
	}
	files, err := unpack(ctx, stream, dir, e.Unpacked)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if errors.Is(err, errBadArchive) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return 0, err
	}
	return files, drain(r)
}

func drain(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}

// swapIn renames tmp to dir, moving an existing dir aside first and
// removing it after. A crash between the renames leaves dir absent (so
// the next wake restores again), never half-written.
func swapIn(tmp, dir string) error {
	old := ""
	if _, err := os.Lstat(dir); err == nil {
		var nerr error
		if old, nerr = siblingName(dir, ".old-"); nerr != nil {
			return nerr
		}
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return err
	}
	if old != "" {
		return removeTree(old)
	}
	return nil
}

// removeTree is os.RemoveAll that also gets through read-only directories
// (a restored tree may have them) when not running as root.
func removeTree(path string) error {
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if info, ierr := d.Info(); ierr == nil && info.Mode().Perm()&0o700 != 0o700 {
				os.Chmod(p, info.Mode().Perm()|0o700)
			}
		}
		return nil
	})
	return os.RemoveAll(path)
}

func siblingName(dir, infix string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return dir + infix + hex.EncodeToString(b[:]), nil
}

// sweepLeftovers removes DIR.restore-* and DIR.old-* siblings an
// interrupted restore left behind.
func sweepLeftovers(dir string) {
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		return
	}
	base := filepath.Base(dir)
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, base+".restore-") || strings.HasPrefix(n, base+".old-") {
			removeTree(filepath.Join(filepath.Dir(dir), n))
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// markerPath is the file beside dir naming the checkpoint dir holds.
func markerPath(dir string) string { return filepath.Clean(dir) + ".checkpoint" }

func writeMarker(dir, key string) error {
	path := markerPath(dir)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(key+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Fresh reports whether dir exists and holds the head's current
// checkpoint as this node last saved or restored it, so it can be used
// without restoring. A dir that exists while the manifest points at a
// checkpoint another node wrote is stale: Fresh is false.
func (c *Checkpointer) Fresh(head Head, dir string) bool {
	if _, err := os.Stat(dir); err != nil {
		return false
	}
	data, err := os.ReadFile(markerPath(dir))
	if err != nil {
		// No marker: a local copy that was never checkpointed is fresh
		// only if there is no checkpoint at all.
		return head.Manifest.Current == nil
	}
	return head.Manifest.Current != nil && strings.TrimSpace(string(data)) == head.Manifest.Current.Key
}
