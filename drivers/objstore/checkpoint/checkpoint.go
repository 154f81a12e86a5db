package checkpoint

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/lease"
)

// Defaults.
const (
	DefaultKeep      = 3
	DefaultOrphanAge = time.Hour
)

// Errors, matched with errors.Is.
var (
	// ErrNoCheckpoint: the host has no checkpoint yet (a first boot).
	ErrNoCheckpoint = errors.New("no checkpoint")
	// ErrFenced: the manifest changed since this holder last saw it:
	// another node claimed the host. Stand down; the save did not land.
	ErrFenced = errors.New("checkpoint fenced: manifest changed since it was claimed")
	// ErrCorrupt: an archive does not match its manifest entry (checksum,
	// size or content). Nothing was changed locally.
	ErrCorrupt = errors.New("checkpoint corrupt")
	// ErrNotClaimed: Save was given a Head that did not come from Claim
	// or Save.
	ErrNotClaimed = errors.New("checkpoint head not claimed")
)

// Config configures a Checkpointer.
type Config struct {
	Store  objstore.Store
	Prefix string
	Clock  clock.Clock
	// Keep is how many checkpoints are kept, the current one included;
	// default 3.
	Keep int
	// Format of new checkpoints; default Cas (incremental and
	// content-addressed, ACT-15; see docs/objstore.md). Tar restores a
	// whole archive in one stream; TarGz trades CPU for bytes.
	Format Format
	// OrphanAge: an archive no manifest references is deleted once the
	// store dates it older than this (left by a crash mid-save);
	// default 1h.
	OrphanAge time.Duration
	// NoSync skips fsync on restore (tests only).
	NoSync bool

	// fetch tunes a restore's download; zero is the default (benchmarks
	// and tests set it through export_test.go).
	fetch fetchTuning
}

// Checkpointer saves and restores data directories. Safe for concurrent
// use on different hosts; one host is driven by one caller at a time.
type Checkpointer struct {
	cfg    Config
	hashes hashCache
	packs  packCache
}

// New checks cfg and returns a Checkpointer.
func New(cfg Config) (*Checkpointer, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("checkpoint: no store")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Keep == 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Keep < 1 {
		return nil, fmt.Errorf("checkpoint: keep %d, want at least 1", cfg.Keep)
	}
	if cfg.Format == "" {
		cfg.Format = Cas
	}
	if !cfg.Format.valid() {
		return nil, fmt.Errorf("checkpoint: format %q unknown", cfg.Format)
	}
	if cfg.OrphanAge == 0 {
		cfg.OrphanAge = DefaultOrphanAge
	}
	if _, err := objstore.Join(cfg.Prefix, "h", "manifest.json"); err != nil {
		return nil, fmt.Errorf("checkpoint: prefix: %w", err)
	}
	return &Checkpointer{cfg: cfg}, nil
}

// Writer is the lease a Claim is made under.
type Writer struct {
	Holder string
	Node   string
	Epoch  uint64
}

// WriterOf is the Writer for a held lease.
func WriterOf(l *lease.Lease) Writer {
	r := l.Record()
	return Writer{Holder: r.Holder, Node: r.Node, Epoch: r.Epoch}
}

// Head is a holder's view of a host's manifest: what it last read or
// wrote, and the ETag its next Save is conditional on.
type Head struct {
	Host     string
	ETag     string
	Manifest Manifest
}

// Stats describe one Save or Restore.
type Stats struct {
	Key      string
	Bytes    int64 // archive bytes moved
	Unpacked int64 // file content bytes
	Files    int
	Skipped  int // sockets and named pipes not saved
	Duration time.Duration
	// GCErrors counts old archives that could not be deleted (retried at
	// the next save).
	GCErrors int
	// MarkerErr: the DIR.checkpoint marker could not be written (Save).
	MarkerErr error
	// Cas saves (ACT-15): Bytes counts only what was uploaded (new blobs
	// and the index); Blobs is how many blobs were uploaded, Reused how
	// many files the store already held; SQLite how many databases were
	// shipped as consistent snapshots (ACT-16).
	// Packs is how many of the blobs went in pack objects (packs.go), and
	// how many pack objects were uploaded.
	Blobs, Reused, SQLite int
	Packed, Packs         int
	// Hashed is how many file bytes a Cas save read to hash (files whose
	// stat is unchanged since the last save are not read again).
	Hashed int64
}

func (c *Checkpointer) manifestKey(host string) (string, error) {
	if err := objstore.ValidName(host); err != nil {
		return "", fmt.Errorf("checkpoint: host: %w", err)
	}
	return objstore.Join(c.cfg.Prefix, host, "manifest.json")
}

func (c *Checkpointer) archiveDir(host string) string {
	key, _ := objstore.Join(c.cfg.Prefix, host, "ckpt")
	return key + "/"
}

// Load reads host's manifest without claiming it. A host never claimed
// gives a Head with an empty ETag and no current checkpoint.
func (c *Checkpointer) Load(ctx context.Context, host string) (Head, error) {
	key, err := c.manifestKey(host)
	if err != nil {
		return Head{}, err
	}
	obj, err := c.cfg.Store.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return Head{Host: host}, nil
	}
	if err != nil {
		return Head{}, fmt.Errorf("checkpoint %s: reading manifest: %w", host, err)
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(io.LimitReader(obj.Body, maxManifestBytes+1))
	if err != nil {
		return Head{}, fmt.Errorf("checkpoint %s: reading manifest: %w", host, objstore.Wrap("checkpoint", "get", key, objstore.ErrTransient, err))
	}
	m, err := DecodeManifest(data)
	if err != nil {
		return Head{}, fmt.Errorf("checkpoint %s: %w: %w", host, ErrCorrupt, err)
	}
	if m.Host != host {
		return Head{}, fmt.Errorf("checkpoint %s: %w: manifest names host %q", host, ErrCorrupt, m.Host)
	}
	return Head{Host: host, ETag: obj.ETag, Manifest: m}, nil
}

// Claim stamps host's manifest with the writer's lease (creating it if
// absent), fencing out every earlier holder, and returns the Head to
// restore from and save on. Call it right after acquiring the lease and
// before restoring.
func (c *Checkpointer) Claim(ctx context.Context, host string, w Writer) (Head, error) {
	if w.Holder == "" || w.Epoch == 0 {
		return Head{}, fmt.Errorf("checkpoint %s: claim needs the lease holder and epoch", host)
	}
	if err := objstore.ValidName(w.Node); err != nil {
		return Head{}, fmt.Errorf("checkpoint %s: claim: node: %w", host, err)
	}
	head, err := c.Load(ctx, host)
	if err != nil {
		return Head{}, err
	}
	m := head.Manifest
	if head.ETag == "" {
		m = Manifest{Version: ManifestVersion, Host: host}
	}
	m.Holder, m.Node, m.Epoch, m.Written = w.Holder, w.Node, w.Epoch, c.cfg.Clock.Now().UTC()
	cond := objstore.IfMatch(head.ETag)
	if head.ETag == "" {
		cond = objstore.CreateOnly()
	}
	return c.writeManifest(ctx, host, m, cond)
}

func (c *Checkpointer) writeManifest(ctx context.Context, host string, m Manifest, cond objstore.Cond) (Head, error) {
	key, err := c.manifestKey(host)
	if err != nil {
		return Head{}, err
	}
	etag, err := c.cfg.Store.Put(ctx, key, bytes.NewReader(m.encode()), cond)
	if errors.Is(err, objstore.ErrPreconditionFailed) {
		return Head{}, fmt.Errorf("checkpoint %s: %w: %w", host, ErrFenced, err)
	}
	if err != nil {
		return Head{}, fmt.Errorf("checkpoint %s: writing manifest: %w", host, err)
	}
	return Head{Host: host, ETag: etag, Manifest: m}, nil
}

// Save checkpoints dir as host's new current checkpoint, conditional on
// head (from Claim or the previous Save). On success it returns the new
// Head. On any failure the previous checkpoint stays current; ErrFenced
// means another node claimed the host.
func (c *Checkpointer) Save(ctx context.Context, head Head, dir string) (Head, Stats, error) {
	began := c.cfg.Clock.Now()
	host := head.Host
	if head.ETag == "" || head.Manifest.Holder == "" {
		return Head{}, Stats{}, fmt.Errorf("checkpoint %s: %w", host, ErrNotClaimed)
	}
	upload := c.upload
	if c.cfg.Format == Cas {
		upload = c.casUpload
	}
	entry, st, err := upload(ctx, head, dir)
	if err != nil {
		return Head{}, Stats{}, fmt.Errorf("checkpoint %s: %w", host, err)
	}
	st.Key = entry.Key
	if err := c.verify(ctx, entry); err != nil {
		c.deleteQuietly(ctx, entry.Key)
		return Head{}, Stats{}, fmt.Errorf("checkpoint %s: verifying upload: %w", host, err)
	}
	next := head.Manifest
	next.Written = c.cfg.Clock.Now().UTC()
	next.History = trimHistory(head.Manifest, c.cfg.Keep)
	next.Current = &entry
	newHead, err := c.writeManifest(ctx, host, next, objstore.IfMatch(head.ETag))
	if errors.Is(err, ErrFenced) {
		newHead, err = c.refused(ctx, head, entry, err)
	}
	if err != nil {
		// A write that failed other than by refusal may have landed and
		// name entry, which then must stay. Unnamed, it is an orphan the
		// next saves collect (OrphanAge).
		return Head{}, Stats{}, err
	}
	if err := writeMarker(dir, entry.Key); err != nil {
		// The checkpoint landed; only the local "fresh" hint is missing,
		// which costs a restore at the next wake on this node.
		st.MarkerErr = err
	}
	st.GCErrors = c.collect(ctx, head.Manifest, next)
	st.Duration = c.cfg.Clock.Since(began)
	return newHead, st, nil
}

// refused settles a manifest switch the store refused (fenced). The
// refusal may be the switch's own doing: a store client that retried a
// write whose answer was lost (the S3 SDK does) is refused by the first
// try, which landed. So the manifest is read: one whose current
// checkpoint is entry, still under head's holder and epoch, is this
// save's, landed, and its Head is returned. Otherwise the save is fenced,
// and entry is deleted only when that manifest names it nowhere; unread,
// entry stays, an orphan if unnamed.
func (c *Checkpointer) refused(ctx context.Context, head Head, entry Entry, fenced error) (Head, error) {
	now, err := c.Load(ctx, head.Host)
	if err != nil {
		return Head{}, fenced
	}
	m := now.Manifest
	if m.Current != nil && m.Current.Key == entry.Key && m.Holder == head.Manifest.Holder && m.Epoch == head.Manifest.Epoch {
		return now, nil
	}
	if !m.keys()[entry.Key] {
		c.deleteQuietly(ctx, entry.Key)
	}
	return Head{}, fenced
}

// trimHistory is the history after a save: the old current first, then
// older ones, keep-1 in all.
func trimHistory(old Manifest, keep int) []Entry {
	var h []Entry
	if old.Current != nil {
		h = append(h, *old.Current)
	}
	h = append(h, old.History...)
	if len(h) > keep-1 {
		h = h[:keep-1]
	}
	return h
}

// upload streams a fresh archive of dir to a new unique key, hashing it on
// the way.
func (c *Checkpointer) upload(ctx context.Context, head Head, dir string) (Entry, Stats, error) {
	// A data directory reached through a symlink is archived as the
	// directory it points at.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Entry{}, Stats{}, err
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return Entry{}, Stats{}, fmt.Errorf("%s is not a directory", dir)
	}
	now := c.cfg.Clock.Now().UTC()
	var rnd [6]byte
	rand.Read(rnd[:])
	key := c.archiveDir(head.Host) + now.Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(rnd[:]) + "." + string(c.cfg.Format)

	pr, pw := io.Pipe()
	packed := make(chan packResult, 1)
	go func() {
		st, err := c.writeArchive(ctx, dir, pw)
		pw.CloseWithError(err) // nil closes cleanly
		packed <- packResult{st, err}
	}()
	h, crc := sha256.New(), newCRC32C()
	counted := &countingReader{r: io.TeeReader(pr, io.MultiWriter(h, crc))}
	_, err = c.cfg.Store.Put(ctx, key, counted, objstore.CreateOnly())
	pr.CloseWithError(errUploadDone) // unblock the packer if Put stopped early
	res := <-packed
	if err != nil || res.err != nil {
		// A store never keeps a put whose body failed, but be sure: this
		// key must never be referenced.
		c.deleteQuietly(ctx, key)
		if res.err != nil && !errors.Is(res.err, errUploadDone) {
			return Entry{}, Stats{}, fmt.Errorf("archiving %s: %w", dir, res.err)
		}
		return Entry{}, Stats{}, fmt.Errorf("uploading: %w", err)
	}
	entry := Entry{
		Key: key, SHA256: hex.EncodeToString(h.Sum(nil)), CRC32C: crcHex(crc), Size: counted.n,
		Unpacked: res.st.unpacked, Files: res.st.files, Format: c.cfg.Format,
		Created: now, Node: head.Manifest.Node, Epoch: head.Manifest.Epoch,
	}
	return entry, Stats{Bytes: counted.n, Unpacked: res.st.unpacked, Files: res.st.files, Skipped: res.st.skipped}, nil
}

var errUploadDone = errors.New("upload finished or failed")

type packResult struct {
	st  packStats
	err error
}

// writeArchive packs dir into w in the configured format.
func (c *Checkpointer) writeArchive(ctx context.Context, dir string, w io.Writer) (packStats, error) {
	if c.cfg.Format == Tar {
		return pack(ctx, dir, w)
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return packStats{}, err
	}
	st, err := pack(ctx, dir, zw)
	if err != nil {
		return st, err
	}
	return st, zw.Close()
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// verify reads the uploaded archive back and checks size and checksum.
func (c *Checkpointer) verify(ctx context.Context, e Entry) error {
	obj, err := c.cfg.Store.Get(ctx, e.Key)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj.Body)
	if err != nil {
		return err
	}
	return checkSum(e, n, h)
}

func checkSum(e Entry, n int64, h hash.Hash) error {
	if n != e.Size {
		return fmt.Errorf("%w: %s is %d bytes, manifest says %d", ErrCorrupt, e.Key, n, e.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		return fmt.Errorf("%w: %s has sha256 %s, manifest says %s", ErrCorrupt, e.Key, got, e.SHA256)
	}
	return nil
}

// collect deletes archives the switch from old to next dropped, and
// orphans (referenced by neither) older than OrphanAge. It returns how
// many deletes failed.
func (c *Checkpointer) collect(ctx context.Context, old, next Manifest) int {
	// Blobs first: their owners are read from the indexes about to go.
	failed := c.collectBlobs(ctx, old, next)
	keep := next.keys()
	for key := range old.keys() {
		if !keep[key] && c.cfg.Store.Delete(ctx, key, objstore.Always) != nil {
			failed++
		}
	}
	infos, err := c.cfg.Store.List(ctx, c.archiveDir(next.Host))
	if err != nil {
		return failed + 1
	}
	now := c.cfg.Clock.Now()
	for _, info := range infos {
		if !keep[info.Key] && now.Sub(info.Modified) > c.cfg.OrphanAge {
			if c.cfg.Store.Delete(ctx, info.Key, objstore.Always) != nil {
				failed++
			}
		}
	}
	return failed
}

// deleteQuietly removes an archive no manifest references; a failure
// leaves an orphan for collect.
func (c *Checkpointer) deleteQuietly(ctx context.Context, key string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = c.cfg.Store.Delete(dctx, key, objstore.Always)
}
