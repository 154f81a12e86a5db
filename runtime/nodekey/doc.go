// Package nodekey is the node's own secret key and what it is used for
// (spec SEC-2): secret env values are kept at rest sealed under it, never
// in plaintext, and revisions hash a keyed digest of them instead of the
// values themselves.
//
// The key is 32 random bytes from crypto/rand in one file of the data
// directory, DATA/node.key, mode 0600, created atomically the first time a
// daemon boots on the directory. Two keys are derived from it with
// HMAC-SHA256, so neither use can weaken the other:
//
//   - sealing: AES-256-GCM with a random 96-bit nonce per value, the
//     value's label (e.g. "env:DB_PASSWORD") as additional data, so a
//     sealed value opens only under its own label; the text form is
//     "v1:" + base64url(nonce || ciphertext || tag);
//   - digests: HMAC-SHA256 of label and value, so equal values give equal
//     revisions on this node while a revision printed in status cannot be
//     used to test guesses of a short secret without the key.
//
// Lose the key and the sealed values are lost with it: back DATA/node.key
// up with the rest of the data directory.
//
// Layer: runtime. It imports nothing from the module; runtime/daemon
// imports it.
package nodekey
