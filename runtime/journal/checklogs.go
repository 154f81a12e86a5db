package journal

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// Badger's log files (write-ahead logs *.mem and value logs *.vlog) are a
// 20-byte header, then entries: meta, user meta, uvarint key length, value
// length and expiry, the key (ending in the 8-byte version), the value,
// and a CRC-32C of all that. Badger replays a log up to its first bad
// entry and cuts the rest off: right for a torn last write, but a log
// damaged in the middle would lose every record after the damage without
// a word. So a bad entry followed by a good one is damage.
const (
	logHeaderSize = 20
	maxKeyLen     = 1 << 16
	// longestHeader: two bytes, a uvarint of at most 3 bytes (key length),
	// 5 (value length) and 10 (expiry).
	longestHeader = 2 + 3 + 5 + 10
	// maxResync bounds the search for a good entry after a bad one.
	maxResync = 200_000
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// keyStarts are how every key in the journal's logs begins: the journal's
// own records, and badger's transaction markers.
var keyStarts = [][]byte{[]byte(keyVersion), []byte("!badger!")}

// logScan is what a log file holds.
type logScan struct {
	entries                int
	minVersion, maxVersion uint64
}

// checkLogs scans every log; it returns the lowest version any write-ahead
// log holds (0 if none holds any).
func checkLogs(dir string, f dirFiles) (walMin uint64, err error) {
	for _, path := range f.wals {
		s, err := scanLog(dir, path)
		if err != nil {
			return 0, err
		}
		if s.entries > 0 && (walMin == 0 || s.minVersion < walMin) {
			walMin = s.minVersion
		}
	}
	for _, path := range f.vlogs {
		if _, err := scanLog(dir, path); err != nil {
			return 0, err
		}
	}
	return walMin, nil
}

func scanLog(dir, path string) (logScan, error) {
	data, release, err := mapFile(path)
	if err != nil {
		return logScan{}, fileError(dir, path, err)
	}
	defer release()
	var s logScan
	if len(data) == 0 {
		return s, nil // created, never written
	}
	if len(data) < logHeaderSize {
		return s, damaged(dir, path, "is shorter (%d bytes) than a log's header", len(data))
	}
	off := logHeaderSize
	for {
		n, key, ok := decodeLogEntry(data, off)
		if !ok {
			break
		}
		s.entries++
		v := keyVersion8(key)
		if s.entries == 1 || v < s.minVersion {
			s.minVersion = v
		}
		s.maxVersion = max(s.maxVersion, v)
		off += n
	}
	if at := resync(data, off); at >= 0 {
		return s, damaged(dir, path, "is damaged at byte %d: records that badger would drop follow at byte %d", off, at)
	}
	return s, nil
}

// decodeLogEntry decodes the entry at off; n is its length. ok is false
// for anything but a whole entry whose checksum matches.
func decodeLogEntry(data []byte, off int) (n int, key []byte, ok bool) {
	if off+2 > len(data) {
		return 0, nil, false
	}
	p := off + 2
	klen, c := binary.Uvarint(data[p:])
	if c <= 0 {
		return 0, nil, false
	}
	p += c
	vlen, c := binary.Uvarint(data[p:])
	if c <= 0 {
		return 0, nil, false
	}
	p += c
	if _, c = binary.Uvarint(data[p:]); c <= 0 {
		return 0, nil, false
	}
	p += c
	if klen == 0 || klen > maxKeyLen || vlen > math.MaxUint32 {
		return 0, nil, false
	}
	end := p + int(klen) + int(vlen)
	if end+crc32.Size > len(data) || end < p {
		return 0, nil, false
	}
	if crc32.Checksum(data[off:end], castagnoli) != binary.BigEndian.Uint32(data[end:]) {
		return 0, nil, false
	}
	return end + crc32.Size - off, data[p : p+int(klen)], true
}

// resync looks for a good entry after the first bad one at off: where a
// key could start, each header length that would put an entry there. It
// returns the good entry's offset, or -1.
func resync(data []byte, off int) int {
	tries := 0
	for _, start := range keyStarts {
		for i := off + 1; i < len(data) && tries < maxResync; {
			j := bytes.Index(data[i:], start)
			if j < 0 {
				break
			}
			k := i + j
			for hl := 5; hl <= longestHeader; hl++ {
				at := k - hl
				if at <= off {
					continue
				}
				tries++
				if n, key, ok := decodeLogEntry(data, at); ok && n > hl && &key[0] == &data[k] {
					return at
				}
			}
			i = k + 1
		}
	}
	return -1
}

// keyVersion8 is the version badger appends to every key (inverted, so
// newer versions sort first).
func keyVersion8(key []byte) uint64 {
	if len(key) < 8 {
		return 0
	}
	return math.MaxUint64 - binary.BigEndian.Uint64(key[len(key)-8:])
}

// mapFile maps path read-only: logs are preallocated sparse files of up
// to 128 MiB, mostly holes.
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() == 0 {
		return nil, func() {}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	return data, func() { _ = unix.Munmap(data) }, nil
}
