package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
)

// Checksums (ACT-9, PERF-5). sha256 names a Cas blob, and a save checks
// what it uploaded against it, so a later save that reuses a blob by name
// reuses those very bytes. A restore, on the wake path, checks each object
// it reads against its size and its CRC-32C instead when the checkpoint
// recorded one: on this machine CRC-32C runs at ~29 GB/s against
// sha256's ~1.8 GB/s, and sha256 of a 64 MiB restore cost about as much
// CPU as its whole download (docs/objstore.md). CRC-32C catches the
// accidental damage a checkpoint meets (a flipped bit, a torn or
// truncated object; S3 and GCS check objects with it too); nobody who can
// rewrite a blob is kept out by a sha256 either, since they can rewrite
// the index beside it. Checkpoints written before CRC-32C was recorded
// are checked with sha256.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func newCRC32C() hash.Hash32 { return crc32.New(castagnoli) }

// crcHex is the hex form of a CRC-32C as manifests and indexes hold it.
func crcHex(h hash.Hash32) string { return crcString(h.Sum32()) }

// crcOf is crcHex of data read whole.
func crcOf(data []byte) string { return crcString(crc32.Checksum(data, castagnoli)) }

func crcString(sum uint32) string { return fmt.Sprintf("%08x", sum) }

func validCRC(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 4
}

// readSum is the hash a restore checks e's bytes with.
func readSum(e Entry) hash.Hash {
	if e.CRC32C != "" {
		return newCRC32C()
	}
	return sha256.New()
}

// checkRead checks n bytes a restore read of e, hashed into h (made by
// readSum).
func checkRead(e Entry, n int64, h hash.Hash) error {
	if e.CRC32C == "" {
		return checkSum(e, n, h)
	}
	if n != e.Size {
		return fmt.Errorf("%w: %s is %d bytes, manifest says %d", ErrCorrupt, e.Key, n, e.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.CRC32C {
		return fmt.Errorf("%w: %s has crc32c %s, manifest says %s", ErrCorrupt, e.Key, got, e.CRC32C)
	}
	return nil
}
