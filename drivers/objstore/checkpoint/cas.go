package checkpoint

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/sqlitesnap"
)

// Incremental, content-addressed checkpoints (ACT-15). A Cas checkpoint
// is an index object under ckpt/ listing every entry of the data
// directory (path, type, mode, mtime, and for a file its size, sha256 and
// CRC-32C);
// file contents live once per content under PREFIX/HOST/blobs/SHA256.
// Save uploads only the blobs the store does not hold yet, so a 1-file
// change costs about that file plus the index.

// IndexVersion is the index format version: 2 when some file is packed
// (packs.go), which older builds refuse rather than misread; 1 otherwise.
const IndexVersion = 2

const indexVersionUnpacked = 1

// memLimit: files up to this size are read into memory once, hashed and
// uploaded from that copy, so a file rewritten meanwhile cannot make the
// blob disagree with its key; larger files are streamed twice and a change
// between the passes fails the save with ErrChanged.
const memLimit = 8 << 20

// Index is the content of a Cas checkpoint's index object.
type Index struct {
	Version int         `json:"v"`
	Entries []IndexItem `json:"entries"`
}

// IndexItem is one entry of a data directory.
type IndexItem struct {
	Path  string    `json:"p"`           // slash-separated, relative; "." is the root
	Type  string    `json:"t"`           // "d" directory, "f" file, "l" symlink
	Mode  int64     `json:"m,omitempty"` // tarMode bits
	MTime time.Time `json:"mt"`
	Size  int64     `json:"s,omitempty"`
	Hash  string    `json:"h,omitempty"`  // hex sha256 of the content (files)
	CRC   string    `json:"c,omitempty"`  // hex CRC-32C of the content (files; sum.go)
	Link  string    `json:"l,omitempty"`  // symlink target
	Kind  string    `json:"k,omitempty"`  // "sqlite": a consistent snapshot of a database (ACT-16)
	Pack  string    `json:"pk,omitempty"` // the pack holding the content (packs.go); empty: blobs/HASH
	Off   int64     `json:"o,omitempty"`  // the content's offset in its pack
}

func (c *Checkpointer) blobDir(host string) string {
	key, _ := objstore.Join(c.cfg.Prefix, host, "blobs")
	return key + "/"
}

// casUpload is Save's upload for the Cas format: hash every file, upload
// the blobs missing from the store, check that every blob the index names
// is there with its size, then upload the index under a new key.
func (c *Checkpointer) casUpload(ctx context.Context, head Head, dir string) (Entry, Stats, error) {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Entry{}, Stats{}, err
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return Entry{}, Stats{}, fmt.Errorf("%s is not a directory", dir)
	}
	have, err := c.listBlobs(ctx, head.Host)
	if err != nil {
		return Entry{}, Stats{}, fmt.Errorf("listing blobs: %w", err)
	}
	cacheKey := head.Host + "\x00" + dir
	s := &casSaver{c: c, ctx: ctx, host: head.Host, have: have, uploaded: map[string]int64{}, refused: map[string]bool{},
		packed: c.packedIn(ctx, head, have), packsPut: map[string]packSum{},
		prev: c.hashes.get(cacheKey), next: map[string]cachedHash{}, scanAt: c.cfg.Clock.Now()}
	if err := s.walk(dir); err != nil {
		return Entry{}, Stats{}, err
	}
	if err := s.flushPack(); err != nil {
		return Entry{}, Stats{}, err
	}
	c.hashes.put(cacheKey, s.next)
	if err := s.checkBlobs(); err != nil {
		return Entry{}, Stats{}, err
	}
	idx := Index{Version: indexVersionUnpacked, Entries: s.items}
	if len(packedOf(idx)) > 0 {
		idx.Version = IndexVersion
	}
	data, err := json.Marshal(idx)
	if err != nil {
		return Entry{}, Stats{}, err
	}
	now := c.cfg.Clock.Now().UTC()
	var rnd [6]byte
	rand.Read(rnd[:])
	key := c.archiveDir(head.Host) + now.Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(rnd[:]) + "." + string(Cas) + ".json"
	if _, err := c.cfg.Store.Put(ctx, key, bytes.NewReader(data), objstore.CreateOnly()); err != nil {
		c.deleteQuietly(ctx, key)
		return Entry{}, Stats{}, fmt.Errorf("uploading the index: %w", err)
	}
	c.packs.put(head.Host, key, packedOf(idx))
	sum := sha256.Sum256(data)
	entry := Entry{
		Key: key, SHA256: hex.EncodeToString(sum[:]), CRC32C: crcOf(data), Size: int64(len(data)),
		Unpacked: s.unpacked, Files: s.files, Format: Cas,
		Created: now, Node: head.Manifest.Node, Epoch: head.Manifest.Epoch,
	}
	st := Stats{
		Bytes: s.sent + int64(len(data)), Unpacked: s.unpacked, Files: s.files, Skipped: s.skipped,
		Blobs: len(s.uploaded) + s.blobs, Reused: s.reused, SQLite: s.sqlite, Hashed: s.hashed,
		Packed: s.blobs, Packs: len(s.packsPut),
	}
	return entry, st, nil
}

func (c *Checkpointer) listBlobs(ctx context.Context, host string) (map[string]int64, error) {
	infos, err := c.cfg.Store.List(ctx, c.blobDir(host))
	if err != nil {
		return nil, err
	}
	have := make(map[string]int64, len(infos))
	for _, info := range infos {
		have[strings.TrimPrefix(info.Key, c.blobDir(host))] = info.Size
	}
	return have, nil
}

type casSaver struct {
	c        *Checkpointer
	ctx      context.Context
	host     string
	have     map[string]int64   // blobs in the store at the start
	uploaded map[string]int64   // blobs this save put, or found put meanwhile (refused)
	refused  map[string]bool    // of uploaded, those another save put meanwhile
	packed   map[string]packLoc // contents in packs, by sha256: the current checkpoint's and this save's
	open     *openPack          // the pack this save is filling
	packsPut map[string]packSum // packs this save put
	blobs    int                // contents this save packed
	items    []IndexItem
	dbs      map[string]bool // relative paths of SQLite databases seen
	sent     int64
	unpacked int64
	files    int
	skipped  int
	reused   int
	sqlite   int
	hashed   int64
	// prev and next are the hash cache before and after this save.
	prev, next map[string]cachedHash
	scanAt     time.Time
}

func (s *casSaver) walk(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		return s.entry(path, filepath.ToSlash(rel), d)
	})
}

func (s *casSaver) entry(path, name string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	item := IndexItem{Path: name, Mode: tarMode(info.Mode()), MTime: info.ModTime().UTC()}
	switch mode := info.Mode(); {
	case mode.IsDir():
		item.Type = "d"
	case mode.IsRegular():
		if s.sqliteSidecar(name) {
			// Folded into the database's snapshot (ACT-16); shipping it
			// beside the snapshot would replay stale frames on restore.
			s.skipped++
			return nil
		}
		return s.file(path, item)
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		item.Type, item.Link, item.Mode = "l", target, 0o777
	case mode&(fs.ModeSocket|fs.ModeNamedPipe) != 0:
		s.skipped++
		return nil
	default:
		return fmt.Errorf("%s: cannot checkpoint a %s", name, mode.Type())
	}
	s.files++
	s.items = append(s.items, item)
	return nil
}

func (s *casSaver) sqliteSidecar(name string) bool {
	for _, suffix := range sqlitesnap.Sidecars {
		if db, ok := strings.CutSuffix(name, suffix); ok && s.dbs[db] {
			return true
		}
	}
	return false
}

// file hashes one regular file and uploads its blob if the store lacks it.
// A SQLite database is replaced by a consistent snapshot (ACT-16).
func (s *casSaver) file(path string, item IndexItem) error {
	item.Type = "f"
	f, info, err := openRegular(path, item.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	item.Mode, item.MTime = tarMode(info.Mode()), info.ModTime().UTC()
	if sqlitesnap.Is(f) {
		if s.dbs == nil {
			s.dbs = map[string]bool{}
		}
		s.dbs[item.Path] = true
		snap, cleanup, err := s.snapshot(path)
		if err != nil {
			return err
		}
		defer cleanup()
		f.Close()
		if f, err = os.Open(snap); err != nil {
			return err
		}
		defer f.Close()
		if info, err = f.Stat(); err != nil {
			return err
		}
		item.Kind = "sqlite"
		s.sqlite++
	}
	item.Size = info.Size()
	key, changed, statOK := statKeyOf(info)
	if c, ok := s.prev[item.Path]; ok && statOK && item.Kind == "" && c.key == key {
		item.Hash, item.CRC = c.hash, c.crc
		s.next[item.Path] = c
		if err := s.putStreamed(f, &item); err != nil {
			return err
		}
		s.files++
		s.unpacked += item.Size
		s.items = append(s.items, item)
		return nil
	}
	s.hashed += item.Size
	if item.Size <= memLimit {
		data, err := io.ReadAll(io.LimitReader(f, item.Size+1))
		if err != nil {
			return err
		}
		if int64(len(data)) != item.Size {
			return fmt.Errorf("%s: %w (was %d bytes, read %d)", item.Path, ErrChanged, item.Size, len(data))
		}
		sum := sha256.Sum256(data)
		item.Hash = hex.EncodeToString(sum[:])
		item.CRC = crcOf(data)
		if err := s.put(&item, data); err != nil {
			return err
		}
	} else {
		h, crc := sha256.New(), newCRC32C()
		n, err := io.Copy(io.MultiWriter(h, crc), io.LimitReader(f, item.Size))
		if err != nil {
			return err
		}
		if n != item.Size {
			return fmt.Errorf("%s: %w (shrank from %d to %d bytes)", item.Path, ErrChanged, item.Size, n)
		}
		item.Hash, item.CRC = hex.EncodeToString(h.Sum(nil)), crcHex(crc)
		if err := s.putStreamed(f, &item); err != nil {
			return err
		}
	}
	if statOK && item.Kind == "" && s.scanAt.Sub(changed) > racyGap && s.scanAt.Sub(info.ModTime()) > racyGap {
		s.next[item.Path] = cachedHash{key: key, hash: item.Hash, crc: item.CRC}
	}
	s.files++
	s.unpacked += item.Size
	s.items = append(s.items, item)
	return nil
}

// snapshot copies a live database to a private file beside the data
// directory (same file system, never inside it).
func (s *casSaver) snapshot(path string) (string, func(), error) {
	tmp, err := os.MkdirTemp("", "engenho-sqlite-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	dst := filepath.Join(tmp, "snapshot.db")
	if err := sqlitesnap.Copy(s.ctx, path, dst); err != nil {
		cleanup()
		return "", nil, err
	}
	return dst, cleanup, nil
}

func (s *casSaver) blobKey(hash string) string { return s.c.blobDir(s.host) + hash }

// held reports whether the store or this save already holds item's
// content, and if it is packed, says where in item.
func (s *casSaver) held(item *IndexItem) bool {
	if size, ok := s.have[item.Hash]; ok && size == item.Size {
		s.reused++
		return true
	}
	if loc, ok := s.packed[item.Hash]; ok && loc.size == item.Size {
		if _, mine := s.packsPut[loc.pack]; !mine && (s.open == nil || s.open.name != loc.pack) {
			s.reused++
		}
		item.Pack, item.Off = loc.pack, loc.off
		return true
	}
	_, ok := s.uploaded[item.Hash]
	return ok
}

// put stores a file's content, read into data, unless the store or this
// save already holds it: a small file in a pack, a larger one as a blob.
func (s *casSaver) put(item *IndexItem, data []byte) error {
	if s.held(item) {
		return nil
	}
	if item.Size > 0 && item.Size <= packLimit {
		return s.pack(item, data)
	}
	_, err := s.putBlob(item, bytes.NewReader(data))
	return err
}

// putBlob uploads a content as a blob of its own.
// It says whether it wrote the body: false when the blob appeared
// meanwhile under this name (content-addressed: another save put the same
// content), and the store may not have read the body at all.
func (s *casSaver) putBlob(item *IndexItem, body io.Reader) (wrote bool, err error) {
	_, err = s.c.cfg.Store.Put(s.ctx, s.blobKey(item.Hash), body, objstore.CreateOnly())
	wrote = err == nil
	if errors.Is(err, objstore.ErrPreconditionFailed) {
		err = nil
	}
	if err != nil {
		return false, fmt.Errorf("uploading blob of %s: %w", item.Path, err)
	}
	s.uploaded[item.Hash] = item.Size // read back and checked either way (checkBlobs)
	if wrote {
		s.sent += item.Size
	} else {
		s.refused[item.Hash] = true
	}
	return wrote, nil
}

// putStreamed stores a file whose sha256 is known (item.Hash) from f
// again (rewound) unless the store holds it: a small one read whole and
// packed, a larger one uploaded while hashed. Content that changed since
// it was hashed is ErrChanged (and an uploaded blob of it removed).
func (s *casSaver) putStreamed(f *os.File, item *IndexItem) error {
	if s.held(item) {
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if item.Size > 0 && item.Size <= packLimit {
		data, err := io.ReadAll(io.LimitReader(f, item.Size+1))
		if err != nil {
			return err
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != item.Hash {
			return fmt.Errorf("%s: %w (content changed since it was hashed)", item.Path, ErrChanged)
		}
		return s.pack(item, data)
	}
	h := sha256.New()
	wrote, err := s.putBlob(item, io.TeeReader(io.LimitReader(f, item.Size), h))
	if err != nil || !wrote {
		// Not written: the body may be unread, and the blob is another
		// save's, never ours to delete.
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != item.Hash {
		s.c.deleteQuietly(s.ctx, s.blobKey(item.Hash))
		delete(s.uploaded, item.Hash)
		return fmt.Errorf("%s: %w (content changed while uploading)", item.Path, ErrChanged)
	}
	return nil
}

// checkBlobs verifies, before the index is written, that the store holds
// every blob the index names with the size it names, and reads each blob
// this save uploaded back to check its sha256 (ACT-9: verify, then
// switch).
func (s *casSaver) checkBlobs() error {
	have, err := s.c.listBlobs(s.ctx, s.host)
	if err != nil {
		return fmt.Errorf("verifying blobs: %w", err)
	}
	for _, it := range s.items {
		if it.Type != "f" {
			continue
		}
		size, ok := have[it.blobName()]
		if it.Pack != "" && (!ok || size < it.Off+it.Size) {
			return fmt.Errorf("verifying blobs: %w: pack %s of %s missing or too short", ErrCorrupt, it.Pack, it.Path)
		}
		if it.Pack == "" && (!ok || size != it.Size) {
			return fmt.Errorf("verifying blobs: %w: blob %s of %s missing or of the wrong size", ErrCorrupt, it.Hash, it.Path)
		}
	}
	// Every bad blob is removed, so no later save takes it for good.
	var first error
	put := map[string]packSum{} // what this save uploaded, by name under blobs/
	for hash, size := range s.uploaded {
		put[hash] = packSum{size: size, sha256: hash}
	}
	maps.Copy(put, s.packsPut)
	for name, sum := range put {
		if err := s.c.checkObject(s.ctx, s.blobKey(name), sum); err != nil {
			// Another save's blob is deleted only when found bad: a read
			// that failed says nothing of it, and that save's checkpoint
			// may name it.
			if !s.refused[name] || errors.Is(err, ErrCorrupt) {
				s.c.deleteQuietly(s.ctx, s.blobKey(name))
			}
			if first == nil {
				first = fmt.Errorf("verifying upload: %w", err)
			}
		}
	}
	return first
}

// checkObject reads one blob or pack and checks its size and sha256.
func (c *Checkpointer) checkObject(ctx context.Context, key string, want packSum) error {
	obj, err := c.cfg.Store.Get(ctx, key)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(obj.Body, want.size+1))
	if err != nil {
		return err
	}
	return checkSum(Entry{Key: key, SHA256: want.sha256, Size: want.size}, n, h)
}

// readIndex fetches a Cas checkpoint's index and verifies it against its
// manifest entry.
func (c *Checkpointer) readIndex(ctx context.Context, e Entry) (Index, error) {
	obj, err := c.cfg.Store.Get(ctx, e.Key)
	if err != nil {
		return Index{}, err
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(io.LimitReader(obj.Body, e.Size+1))
	if err != nil {
		return Index{}, err
	}
	h := readSum(e)
	h.Write(data)
	if err := checkRead(e, int64(len(data)), h); err != nil {
		return Index{}, err
	}
	var idx Index
	if err := json.Unmarshal(data, &idx); err != nil || idx.Version < indexVersionUnpacked || idx.Version > IndexVersion {
		return Index{}, fmt.Errorf("%w: index %s: version %d, %v", ErrCorrupt, e.Key, idx.Version, err)
	}
	for _, it := range idx.Entries {
		if err := it.validPlace(); err != nil {
			return Index{}, fmt.Errorf("%w: index %s: %s: %w", ErrCorrupt, e.Key, it.Path, err)
		}
	}
	return idx, nil
}

// casFetchInto restores a Cas checkpoint into dir (an empty directory):
// the index, verified, then every file's blob, downloaded ahead of the
// extraction and each verified against its size and checksum (sum.go)
// before the restore counts as done (ACT-15, PERF-5).
func (c *Checkpointer) casFetchInto(ctx context.Context, host string, e Entry, dir string) (int, error) {
	idx, err := c.readIndex(ctx, e)
	if err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	var targets []target
	for _, it := range idx.Entries {
		if it.Type == "f" {
			targets = append(targets, c.blobTarget(host, it))
		}
	}
	f := c.newFetcher(ctx, targets)
	u := &unpacker{root: root, limit: e.Unpacked, links: map[string]bool{}, buf: make([]byte, 1<<20)}
	if err := f.finish(casExtract(ctx, idx, u, f)); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			err = fmt.Errorf("%w: blob missing: %w", ErrCorrupt, err)
		}
		return u.files, err
	}
	return u.files, u.finish()
}

// casExtract makes the index's entries in order, each file from its blob
// as the fetcher delivers it.
func casExtract(ctx context.Context, idx Index, u *unpacker, f *fetcher) error {
	blob := 0
	for _, it := range idx.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr := &tar.Header{Name: it.Path, Mode: it.Mode, ModTime: it.MTime, Size: it.Size, Linkname: it.Link}
		var body io.Reader = bytes.NewReader(nil)
		switch it.Type {
		case "d":
			hdr.Typeflag = tar.TypeDir
		case "l":
			hdr.Typeflag = tar.TypeSymlink
		case "f":
			hdr.Typeflag = tar.TypeReg
			body = f.reader(blob)
			blob++
		default:
			return fmt.Errorf("%w: index entry %q has type %q", ErrCorrupt, it.Path, it.Type)
		}
		err := u.entry(hdr, body)
		if errors.Is(err, errBadArchive) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		// Read the blob to its end either way: the fetcher checks it
		// there, and on a failure its checksum tells a damaged blob from
		// a local fault.
		if derr := drain(body); err == nil {
			err = derr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ReadFile returns the content of one file of host's checkpoint e, with
// the index and the blob verified (the chaos suite reads checkpoints this
// way). For a Tar checkpoint it reads the archive.
func (c *Checkpointer) ReadFile(ctx context.Context, host string, e Entry, name string) ([]byte, error) {
	if e.Format != Cas {
		return nil, fmt.Errorf("checkpoint %s: ReadFile reads %s checkpoints, %s is %s", host, Cas, e.Key, e.Format)
	}
	idx, err := c.readIndex(ctx, e)
	if err != nil {
		return nil, err
	}
	for _, it := range idx.Entries {
		if it.Path != name || it.Type != "f" {
			continue
		}
		f := c.newFetcher(ctx, []target{c.blobTarget(host, it)})
		data, err := io.ReadAll(f.reader(0))
		if err := f.finish(err); err != nil {
			return nil, err
		}
		return data, nil
	}
	return nil, fmt.Errorf("checkpoint %s: %s: %w", host, name, fs.ErrNotExist)
}

// collectBlobs deletes blobs no kept checkpoint names (ACT-15). A blob is
// deleted when a dropped checkpoint named it, or when nothing names it and
// the store dates it older than OrphanAge (left by a failed save). If any
// kept index cannot be read, nothing is deleted: a blob is never removed
// on a guess. It returns how many deletes failed.
func (c *Checkpointer) collectBlobs(ctx context.Context, old, next Manifest) int {
	kept := map[string]bool{}
	dropped := map[string]bool{}
	anyCas := false
	add := func(e Entry, into map[string]bool) bool {
		if e.Format != Cas {
			return true
		}
		anyCas = true
		idx, err := c.readIndex(ctx, e)
		if err != nil {
			return false
		}
		for _, it := range idx.Entries {
			if it.Type == "f" {
				into[it.blobName()] = true
			}
		}
		return true
	}
	keepKeys := next.keys()
	for _, e := range entries(next) {
		if !add(e, kept) {
			return 1
		}
	}
	for _, e := range entries(old) {
		if !keepKeys[e.Key] {
			add(e, dropped) // unreadable: its blobs become orphans, aged out
		}
	}
	if !anyCas {
		return 0
	}
	infos, err := c.cfg.Store.List(ctx, c.blobDir(next.Host))
	if err != nil {
		return 1
	}
	failed := 0
	now := c.cfg.Clock.Now()
	for _, info := range infos {
		hash := strings.TrimPrefix(info.Key, c.blobDir(next.Host))
		if kept[hash] || (!dropped[hash] && now.Sub(info.Modified) <= c.cfg.OrphanAge) {
			continue
		}
		if c.cfg.Store.Delete(ctx, info.Key, objstore.Always) != nil {
			failed++
		}
	}
	return failed
}

// entries is the manifest's checkpoints, current first.
func entries(m Manifest) []Entry {
	var out []Entry
	if m.Current != nil {
		out = append(out, *m.Current)
	}
	return append(out, m.History...)
}
