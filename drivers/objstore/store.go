package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/engenho/engenho/drivers"
)

// Kinds of object-store error, matched with errors.Is. ErrNotFound,
// ErrTransient and ErrInvalid are the drivers package's kinds, so code that
// already handles driver errors handles these too.
var (
	// ErrNotFound: the key does not exist (Get only; Delete of a missing key
	// is not an error).
	ErrNotFound = drivers.ErrNotFound
	// ErrPreconditionFailed: a conditional put or delete lost: the key
	// exists (create-only) or its ETag is not the one given (If-Match), or a
	// concurrent conditional write won the race.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrTransient: the store could not be reached or answered with a
	// server error; the same call may succeed later. Cancellation is
	// reported with this kind too, wrapping the context's error.
	ErrTransient = drivers.ErrTransient
	// ErrInvalid: a bad key or argument, or a store refusing the request
	// for good (bad credentials, missing bucket).
	ErrInvalid = drivers.ErrInvalid
)

// Store is an object store. Every method takes a context and honours its
// cancellation; implementations are safe for concurrent use.
type Store interface {
	// Get opens the object at key. The caller closes Body.
	Get(ctx context.Context, key string) (*Object, error)
	// Put stores body under key when cond holds, streaming it (large bodies
	// go up in parts where the backend supports it). It returns the new
	// ETag. A body that fails midway leaves the previous object intact.
	Put(ctx context.Context, key string, body io.Reader, cond Cond) (etag string, err error)
	// Delete removes key; a missing key is not an error unless cond has
	// IfMatch. Conditional delete is NOT reliable on S3 servers (MinIO and
	// gofakes3 ignore If-Match on DELETE): never build a protocol on it.
	Delete(ctx context.Context, key string, cond Cond) error
	// List returns the objects whose key starts with prefix (a plain string
	// prefix, not only whole segments), sorted by key. Do not make a key
	// that is also the "directory" of other keys ("a/b" and "a/b/c"): fs
	// and S3 allow it, but MinIO's listing then hides the children.
	List(ctx context.Context, prefix string) ([]Info, error)
}

// RangeReader is a Store that reads part of an object (an HTTP Range
// request on S3). It is optional: find it with a type assertion. Large
// downloads use it to fetch one object in parallel pieces (PERF-5).
type RangeReader interface {
	// GetRange opens at most n bytes of key's object from byte off: the
	// body holds exactly min(n, Size-off) bytes, none when off is at or
	// past the end or n is 0. Info describes the whole object (Size is
	// its full size). A missing key is ErrNotFound; a negative off or n
	// is ErrInvalid. The caller closes Body.
	GetRange(ctx context.Context, key string, off, n int64) (*Object, error)
}

// RangeLen is how many bytes a range of n from off holds in an object of
// size bytes.
func RangeLen(size, off, n int64) int64 {
	return max(0, min(n, size-off))
}

// CheckRange validates GetRange's arguments.
func CheckRange(off, n int64) error {
	if off < 0 || n < 0 {
		return fmt.Errorf("range of %d bytes from %d: want both >= 0", n, off)
	}
	return nil
}

// Object is an open object.
type Object struct {
	Body io.ReadCloser
	Info
}

// Info describes a stored object.
type Info struct {
	Key  string
	ETag string // opaque; compare only with other ETags from the same store
	Size int64
	// Modified is the store's time of the last write (its own clock).
	Modified time.Time
}

// Cond is the condition of a put or delete. The zero Cond always holds.
type Cond struct {
	// IfNoneMatch makes a put create-only ("If-None-Match: *").
	IfNoneMatch bool
	// IfMatch, when set, requires the current object's ETag to equal it.
	IfMatch string
}

// Always is the condition that always holds.
var Always = Cond{}

// CreateOnly is the condition of a put that must not replace anything.
func CreateOnly() Cond { return Cond{IfNoneMatch: true} }

// IfMatch is the condition that the object's ETag is etag.
func IfMatch(etag string) Cond { return Cond{IfMatch: etag} }

// Check validates the condition itself (not whether it holds).
func (c Cond) Check() error {
	if c.IfNoneMatch && c.IfMatch != "" {
		return errors.New("condition has both If-None-Match and If-Match")
	}
	return nil
}

// Holds reports whether the condition holds for an object that exists (or
// not) with the given ETag. Stores that evaluate conditions themselves (fs,
// fake) use it so they agree exactly.
func (c Cond) Holds(exists bool, etag string) bool {
	if c.IfNoneMatch && exists {
		return false
	}
	if c.IfMatch != "" && (!exists || etag != c.IfMatch) {
		return false
	}
	return true
}

// Errorf builds an object-store error of the given kind. store names the
// backend ("fs", "s3", "fake"), op the operation, key the object.
func Errorf(store, op, key string, kind error, format string, args ...any) error {
	return drivers.Errorf(store, op, key, kind, format, args...)
}

// Wrap builds an object-store error of the given kind around cause.
func Wrap(store, op, key string, kind, cause error) error {
	return drivers.Wrap(store, op, key, kind, cause)
}

// ContextError wraps a context's error as a transient failure, so callers
// can test both errors.Is(err, ErrTransient) and errors.Is(err,
// context.Canceled).
func ContextError(store, op, key string, ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return Wrap(store, op, key, ErrTransient, err)
	}
	return nil
}
