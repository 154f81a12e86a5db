package daemonconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
)

// Digest is the SHA-256 of a config file's bytes, exactly as Load parsed
// them. Environment overrides are not part of it: they cannot change while
// the daemon runs.
type Digest [sha256.Size]byte

// DigestOf returns the digest of b.
func DigestOf(b []byte) Digest { return sha256.Sum256(b) }

// String is the digest in hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// IsZero reports whether d is the zero value (no file was read).
func (d Digest) IsZero() bool { return d == Digest{} }

// Changed re-reads path and reports whether its bytes differ from the ones
// digested as d (DMN-16). A boot that failed on its config calls it: if
// the file changed since it was read (a reader can catch an editor between
// truncating and writing), the daemon retries once at once instead of
// holding. A file that cannot be read now is reported as an error.
func Changed(path string, d Digest) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, &Error{File: path, Kind: ErrRead, Msg: "cannot read", Err: err}
	}
	now := DigestOf(b)
	return !bytes.Equal(now[:], d[:]), nil
}
