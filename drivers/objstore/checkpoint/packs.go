package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/engenho/engenho/drivers/objstore"
)

// Packs (ACT-15, PERF-5). A Cas save puts the new contents of small
// files, one after the other, into pack objects of about a chunk
// (PREFIX/HOST/blobs/p-TIME-RANDOM) instead of a blob each: an object
// costs the store and the client far more than its bytes (on this machine
// ~0.9 ms of CPU for each small GET), so a restore of 256 files of 32 KiB
// took 4x the raw download of the same bytes as one object. The index
// names, for a packed file, its pack and offset ("pk", "o"); a restore
// reads a run of neighbouring files of one pack with one ranged GET, and
// checks each file as before. Deduplication stays per file: a later save
// finds an unchanged small file's content where the current checkpoint's
// index says it is, and packs only new contents. A pack is kept while a
// kept checkpoint names it (whole, even if only some of its files are
// still named), and collected like a blob after.

const (
	// packLimit: files up to this size are packed.
	packLimit = 1 << 20
	// packTarget: a pack is uploaded once it holds this much.
	packTarget = 8 << 20
	// packPrefix starts a pack's name; a blob's name is 64 hex digits.
	packPrefix = "p-"
	// packSparse: a pack the current checkpoint names less than
	// 1/packSparse of is not reused (packedIn).
	packSparse = 4
)

// packLoc is where a file's content sits in a pack.
type packLoc struct {
	pack      string
	off, size int64
}

// openPack is the pack a save is filling.
type openPack struct {
	name string
	data []byte
}

// packed returns the packed contents the current checkpoint names, where
// their pack is still in the store (have) and not sparse: a save reuses
// them rather than packing them again. A pack is kept whole while a kept
// checkpoint names any of its files, so reusing the last few files of a
// pack the current checkpoint names less than 1/packSparse of would keep
// its dropped bytes for ever; those files are packed again instead, and
// the pack goes once the checkpoints that name it are dropped. Without a
// readable current Cas index, nothing is reused and the contents are
// packed again.
func (c *Checkpointer) packedIn(ctx context.Context, head Head, have map[string]int64) map[string]packLoc {
	out := map[string]packLoc{}
	cur := head.Manifest.Current
	if cur == nil || cur.Format != Cas {
		return out
	}
	locs, ok := c.packs.get(head.Host, cur.Key)
	if !ok {
		idx, err := c.readIndex(ctx, *cur)
		if err != nil {
			return out
		}
		locs = packedOf(idx)
	}
	live := map[string]int64{} // bytes of each pack the index names
	for _, loc := range locs {
		live[loc.pack] += loc.size
	}
	for hash, loc := range locs {
		size, ok := have[loc.pack]
		if ok && loc.off+loc.size <= size && live[loc.pack]*packSparse >= size {
			out[hash] = loc
		}
	}
	return out
}

// packedOf lists where an index's packed files are, by content.
func packedOf(idx Index) map[string]packLoc {
	locs := map[string]packLoc{}
	for _, it := range idx.Entries {
		if it.Type == "f" && it.Pack != "" {
			locs[it.Hash] = packLoc{pack: it.Pack, off: it.Off, size: it.Size}
		}
	}
	return locs
}

// pack adds a small file's content to the open pack, and uploads the pack
// once it is full.
func (s *casSaver) pack(item *IndexItem, data []byte) error {
	if s.open == nil {
		var rnd [6]byte
		rand.Read(rnd[:])
		name := packPrefix + s.c.cfg.Clock.Now().UTC().Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(rnd[:])
		s.open = &openPack{name: name} // grown by append: most saves pack a few small files
	}
	loc := packLoc{pack: s.open.name, off: int64(len(s.open.data)), size: item.Size}
	s.open.data = append(s.open.data, data...)
	s.packed[item.Hash] = loc
	item.Pack, item.Off = loc.pack, loc.off
	s.blobs++
	if len(s.open.data) >= packTarget {
		return s.flushPack()
	}
	return nil
}

// flushPack uploads the open pack, if any.
func (s *casSaver) flushPack() error {
	p := s.open
	if p == nil {
		return nil
	}
	s.open = nil
	_, err := s.c.cfg.Store.Put(s.ctx, s.blobKey(p.name), bytes.NewReader(p.data), objstore.CreateOnly())
	if err != nil {
		s.c.deleteQuietly(s.ctx, s.blobKey(p.name))
		return fmt.Errorf("uploading pack %s: %w", p.name, err)
	}
	sum := sha256.Sum256(p.data)
	s.packsPut[p.name] = packSum{size: int64(len(p.data)), sha256: hex.EncodeToString(sum[:])}
	s.sent += int64(len(p.data))
	return nil
}

// packSum is what a blob or pack this save uploaded must read back as.
type packSum struct {
	size   int64
	sha256 string
}

// blobName is the object under blobs/ that holds a file's content.
func (it IndexItem) blobName() string {
	if it.Pack != "" {
		return it.Pack
	}
	return it.Hash
}

// validPlace checks where an index says a file's content is. A restore
// checks the content against its CRC-32C, which, unlike the sha256, does
// not tie it to the blob's name, so the name itself must be a sha256.
func (it IndexItem) validPlace() error {
	if it.Type != "f" {
		return nil
	}
	if sum, err := hex.DecodeString(it.Hash); err != nil || len(sum) != sha256.Size {
		return fmt.Errorf("sha256 %q is not 64 hex digits", it.Hash)
	}
	if it.Pack == "" {
		return nil
	}
	if !strings.HasPrefix(it.Pack, packPrefix) || objstore.ValidName(it.Pack) != nil {
		return fmt.Errorf("pack name %q", it.Pack)
	}
	// The end must be an offset too: past MaxInt64 it would wrap, and a
	// restore would take the read for a short, transient one.
	if it.Off < 0 || it.Size <= 0 || it.Off > math.MaxInt64-it.Size {
		return fmt.Errorf("packed at offset %d with size %d", it.Off, it.Size)
	}
	return nil
}

// packCache remembers, per host, where the packed files of the index a
// save wrote last are, so the next save need not read that index back.
type packCache struct {
	mu     sync.Mutex
	byHost map[string]cachedPacks
}

type cachedPacks struct {
	key  string // the index's key
	locs map[string]packLoc
}

func (c *packCache) get(host, key string) (map[string]packLoc, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.byHost[host]
	if !ok || p.key != key {
		return nil, false
	}
	return p.locs, true
}

func (c *packCache) put(host, key string, locs map[string]packLoc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byHost == nil {
		c.byHost = map[string]cachedPacks{}
	}
	c.byHost[host] = cachedPacks{key: key, locs: locs}
}
