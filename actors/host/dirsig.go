package host

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io/fs"
	"path/filepath"
)

// signature is how a checkpoint tells "a change" (ACT-9): a hash over the
// path, size, mode and modification time of every entry of dir. A write
// that changes a file's size or mtime changes it; scanning a data
// directory of thousands of files costs a few milliseconds, so the stream
// class scans every second. An absent dir has the empty signature.
func signature(dir string) (string, error) {
	h := sha256.New()
	var buf [8]byte
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // vanished while scanning: the next scan sees it
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h.Write([]byte(rel))
		h.Write([]byte{0})
		binary.LittleEndian.PutUint64(buf[:], uint64(info.Size()))
		h.Write(buf[:])
		binary.LittleEndian.PutUint64(buf[:], uint64(info.Mode()))
		h.Write(buf[:])
		binary.LittleEndian.PutUint64(buf[:], uint64(info.ModTime().UnixNano()))
		h.Write(buf[:])
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
