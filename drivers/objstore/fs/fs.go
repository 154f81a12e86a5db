package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
)

const (
	storeName   = "fs"
	formatLine  = "engenho-objstore-fs 1\n"
	objSuffix   = "~o"
	headerMagic = "EOBJ1 "
	// headerLen is the header: magic, 64 hex digits, newline.
	headerLen = len(headerMagic) + 64 + 1
	// staleTemp is how old a temp file must be before Open sweeps it.
	staleTemp = 24 * time.Hour
)

// errCorrupt marks an object file whose header is not ours.
var errCorrupt = errors.New("object header is corrupt")

// Options tune Open. The zero value is fine.
type Options struct {
	// Clock dates the sweep of stale temp files; default the real clock.
	Clock clock.Clock
	// NoSync skips fsync (tests on throwaway dirs only).
	NoSync bool
}

// Store is a directory-backed object store. Safe for concurrent use by many
// goroutines and by many processes sharing the directory.
type Store struct {
	dir     string
	objects string
	tmp     string
	sync    bool

	mu   sync.Mutex // serialises this process's writers before the flock
	lock *os.File
}

var (
	_ objstore.Store       = (*Store)(nil)
	_ objstore.RangeReader = (*Store)(nil)
)

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, objstore.Wrap(storeName, "open", "", objstore.ErrInvalid, err)
	}
	s := &Store{dir: abs, objects: filepath.Join(abs, "objects"), tmp: filepath.Join(abs, "tmp"), sync: !opts.NoSync}
	if err := s.init(); err != nil {
		return nil, objstore.Wrap(storeName, "open", "", objstore.ErrInvalid, fmt.Errorf("%s: %w", abs, err))
	}
	s.sweepTemp(opts.Clock.Now())
	return s, nil
}

func (s *Store) init() error {
	for _, d := range []string{s.dir, s.objects, s.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := s.checkFormat(); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	s.lock = lock
	return nil
}

// checkFormat writes the FORMAT file on first use and refuses a directory
// written by something else.
func (s *Store) checkFormat() error {
	path := filepath.Join(s.dir, "FORMAT")
	got, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return os.WriteFile(path, []byte(formatLine), 0o600)
	}
	if err != nil {
		return err
	}
	if string(got) != formatLine {
		return fmt.Errorf("FORMAT is %q, want %q", strings.TrimSpace(string(got)), strings.TrimSpace(formatLine))
	}
	return nil
}

// sweepTemp removes temp files a crashed writer left behind.
func (s *Store) sweepTemp(now time.Time) {
	entries, err := os.ReadDir(s.tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && now.Sub(info.ModTime()) > staleTemp {
			_ = os.Remove(filepath.Join(s.tmp, e.Name()))
		}
	}
}

// Close releases the lock file. The store must not be used afterwards.
func (s *Store) Close() error { return s.lock.Close() }

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path is the file holding key's object (tests corrupt it on purpose).
func (s *Store) Path(key string) (string, error) {
	if err := objstore.ValidKey(key); err != nil {
		return "", objstore.Wrap(storeName, "path", key, objstore.ErrInvalid, err)
	}
	return s.path(key), nil
}

func (s *Store) path(key string) string {
	return filepath.Join(s.objects, filepath.FromSlash(key)+objSuffix)
}

// Get opens key's object.
func (s *Store) Get(ctx context.Context, key string) (*objstore.Object, error) {
	if err := s.start(ctx, "get", key); err != nil {
		return nil, err
	}
	f, etag, size, mod, err := openObject(s.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, objstore.Errorf(storeName, "get", key, objstore.ErrNotFound, "")
	}
	if err != nil {
		return nil, s.ioError("get", key, ctx, err)
	}
	body := &objectBody{Reader: io.NewSectionReader(f, int64(headerLen), size), f: f}
	return &objstore.Object{Body: body, Info: objstore.Info{Key: key, ETag: etag, Size: size, Modified: mod}}, nil
}

// GetRange opens at most n bytes of key's object from byte off.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (*objstore.Object, error) {
	if err := objstore.CheckRange(off, n); err != nil {
		return nil, objstore.Wrap(storeName, "get", key, objstore.ErrInvalid, err)
	}
	obj, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	body := obj.Body.(*objectBody)
	body.Reader = io.NewSectionReader(body.f, int64(headerLen)+min(off, obj.Size), objstore.RangeLen(obj.Size, off, n))
	return obj, nil
}

type objectBody struct {
	io.Reader
	f *os.File
}

func (b *objectBody) Close() error { return b.f.Close() }

// start validates key and checks ctx before an operation.
func (s *Store) start(ctx context.Context, op, key string) error {
	if err := objstore.ValidKey(key); err != nil {
		return objstore.Wrap(storeName, op, key, objstore.ErrInvalid, err)
	}
	return objstore.ContextError(storeName, op, key, ctx)
}

// openObject opens an object file and reads its header.
func openObject(path string) (f *os.File, etag string, size int64, mod time.Time, err error) {
	f, err = os.Open(path)
	if err != nil {
		return nil, "", 0, time.Time{}, err
	}
	etag, err = readHeader(f)
	if err == nil {
		var info os.FileInfo
		if info, err = f.Stat(); err == nil {
			size, mod = info.Size()-int64(headerLen), info.ModTime()
		}
	}
	if err != nil {
		f.Close()
		return nil, "", 0, time.Time{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, etag, size, mod, nil
}

func readHeader(f *os.File) (string, error) {
	var h [headerLen]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		if errors.Is(err, io.EOF) {
			return "", errCorrupt // shorter than a header
		}
		return "", fmt.Errorf("object header: %w", err)
	}
	etag, ok := parseHeader(h[:])
	if !ok {
		return "", errCorrupt
	}
	return etag, nil
}

func header(etag string) []byte {
	return []byte(headerMagic + etag + "\n")
}

func parseHeader(h []byte) (string, bool) {
	if len(h) != headerLen || !strings.HasPrefix(string(h), headerMagic) || h[headerLen-1] != '\n' {
		return "", false
	}
	etag := string(h[len(headerMagic) : headerLen-1])
	if _, err := hex.DecodeString(etag); err != nil {
		return "", false
	}
	return etag, true
}

// currentETag reads the ETag of key's object; exists is false when absent.
func currentETag(path string) (etag string, exists bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	etag, err = readHeader(f)
	return etag, err == nil, err
}

// Put stores body under key when cond holds.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if err := s.start(ctx, "put", key); err != nil {
		return "", err
	}
	if err := cond.Check(); err != nil {
		return "", objstore.Wrap(storeName, "put", key, objstore.ErrInvalid, err)
	}
	tmp, etag, err := s.writeTemp(ctx, body)
	if err != nil {
		return "", s.ioError("put", key, ctx, err)
	}
	err = s.locked(func() error {
		if err := s.checkCond(ctx, "put", key, cond); err != nil {
			return err
		}
		return s.install(tmp, s.path(key))
	})
	if err != nil {
		os.Remove(tmp) // harmless if the rename happened and only the dir sync failed
		return "", s.ioError("put", key, ctx, err)
	}
	return etag, nil
}

// writeTemp streams body to a new temp file behind a placeholder header,
// then writes the real header and syncs. It returns the file and the ETag.
func (s *Store) writeTemp(ctx context.Context, body io.Reader) (path, etag string, err error) {
	f, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return "", "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(make([]byte, headerLen)); err != nil {
		return "", "", err
	}
	h := sha256.New()
	if _, err = io.Copy(io.MultiWriter(f, h), ctxReader{ctx: ctx, r: body}); err != nil {
		return "", "", err
	}
	etag = hex.EncodeToString(h.Sum(nil))
	if _, err = f.WriteAt(header(etag), 0); err != nil {
		return "", "", err
	}
	if s.sync {
		err = f.Sync()
	}
	return f.Name(), etag, err
}

// ctxReader stops a copy once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// install renames tmp to path, creating parent directories, and syncs the
// directory. Called with the lock held.
func (s *Store) install(tmp, path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return s.syncDir(dir)
}

func (s *Store) syncDir(dir string) error {
	if !s.sync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkCond evaluates cond against key's current object. Called with the
// lock held.
func (s *Store) checkCond(ctx context.Context, op, key string, cond objstore.Cond) error {
	if err := objstore.ContextError(storeName, op, key, ctx); err != nil {
		return err
	}
	if cond == objstore.Always {
		return nil
	}
	etag, exists, err := currentETag(s.path(key))
	if err != nil {
		return err
	}
	if !cond.Holds(exists, etag) {
		return objstore.Errorf(storeName, op, key, objstore.ErrPreconditionFailed, "%s", describeMiss(cond, exists))
	}
	return nil
}

func describeMiss(cond objstore.Cond, exists bool) string {
	switch {
	case cond.IfNoneMatch:
		return "object exists"
	case !exists:
		return "object does not exist"
	default:
		return "ETag does not match"
	}
}

// locked runs fn holding the process mutex and the exclusive flock.
func (s *Store) locked(fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := flock(s.lock, syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer flock(s.lock, syscall.LOCK_UN)
	return fn()
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// ioError classifies a failure: store errors pass through, a done context
// becomes transient, anything else from the file system is transient too
// (disk full, I/O error) since the same call may succeed later.
func (s *Store) ioError(op, key string, ctx context.Context, err error) error {
	var typed *drivers.Error
	if errors.As(err, &typed) {
		return err
	}
	if errors.Is(err, errCorrupt) {
		return objstore.Wrap(storeName, op, key, objstore.ErrInvalid, err)
	}
	if ctx.Err() != nil {
		return objstore.Wrap(storeName, op, key, objstore.ErrTransient, ctx.Err())
	}
	return objstore.Wrap(storeName, op, key, objstore.ErrTransient, err)
}

// Delete removes key; with cond.IfMatch only when its ETag matches.
func (s *Store) Delete(ctx context.Context, key string, cond objstore.Cond) error {
	if err := s.start(ctx, "delete", key); err != nil {
		return err
	}
	if cond.IfNoneMatch {
		return objstore.Errorf(storeName, "delete", key, objstore.ErrInvalid, "If-None-Match makes no sense on delete")
	}
	err := s.locked(func() error {
		if err := s.checkCond(ctx, "delete", key, cond); err != nil {
			return err
		}
		path := s.path(key)
		if err := os.Remove(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := s.syncDir(filepath.Dir(path)); err != nil {
			return err
		}
		s.pruneDirs(filepath.Dir(path))
		return nil
	})
	if err != nil {
		return s.ioError("delete", key, ctx, err)
	}
	return nil
}

// pruneDirs removes now-empty directories from dir up to objects/. Called
// with the lock held, so no put is installing into them meanwhile.
func (s *Store) pruneDirs(dir string) {
	for dir != s.objects && strings.HasPrefix(dir, s.objects) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// List returns the objects whose key starts with prefix, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	if err := objstore.ValidPrefix(prefix); err != nil {
		return nil, objstore.Wrap(storeName, "list", prefix, objstore.ErrInvalid, err)
	}
	if err := objstore.ContextError(storeName, "list", prefix, ctx); err != nil {
		return nil, err
	}
	// Walk only the deepest directory the prefix fully names.
	base := s.objects
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base = filepath.Join(s.objects, filepath.FromSlash(prefix[:i]))
	}
	var out []objstore.Info
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking, or the base never existed
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, objSuffix) {
			return nil
		}
		rel, _ := filepath.Rel(s.objects, path)
		key := strings.TrimSuffix(filepath.ToSlash(rel), objSuffix)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, ok, err := stat(path, key)
		if ok {
			out = append(out, info)
		}
		return err
	})
	if err != nil {
		return nil, s.ioError("list", prefix, ctx, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// stat reads one object's Info; ok is false when it vanished meanwhile.
func stat(path, key string) (objstore.Info, bool, error) {
	f, etag, size, mod, err := openObject(path)
	if errors.Is(err, fs.ErrNotExist) {
		return objstore.Info{}, false, nil
	}
	if err != nil {
		return objstore.Info{}, false, err
	}
	f.Close()
	return objstore.Info{Key: key, ETag: etag, Size: size, Modified: mod}, true, nil
}
