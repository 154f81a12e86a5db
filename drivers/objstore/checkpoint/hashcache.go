package checkpoint

import (
	"io/fs"
	"sync"
	"syscall"
	"time"
)

// racyGap: a file changed less than this before a save's scan began is
// hashed again at the next save whatever its stat says, since a write in
// the same file-system timestamp tick would not change it (git's "racy
// clean" problem).
const racyGap = 2 * time.Second

// statKey is what must be unchanged for a file's last hash to stand:
// size, mtime, ctime (any write or chmod moves it), inode and device.
type statKey struct {
	size         int64
	mtime, ctime int64
	ino, dev     uint64
}

func statKeyOf(info fs.FileInfo) (statKey, time.Time, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return statKey{}, time.Time{}, false
	}
	ctime := time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	return statKey{size: info.Size(), mtime: info.ModTime().UnixNano(), ctime: ctime.UnixNano(), ino: st.Ino, dev: uint64(st.Dev)}, ctime, true
}

type cachedHash struct {
	key  statKey
	hash string // sha256
	crc  string // CRC-32C
}

// hashCache remembers, per host and data directory, the sha256 and
// CRC-32C of files as the last save hashed them, so an unchanged file is
// not read again (ACT-15). Entries are only as good as the local file system's stat; a
// cached hash whose blob must be uploaded is verified while uploading.
type hashCache struct {
	mu     sync.Mutex
	byHost map[string]map[string]cachedHash
}

func (c *hashCache) get(host string) map[string]cachedHash {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byHost[host]
}

func (c *hashCache) put(host string, m map[string]cachedHash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byHost == nil {
		c.byHost = map[string]map[string]cachedHash{}
	}
	c.byHost[host] = m
}
