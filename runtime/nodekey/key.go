package nodekey

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Kinds of failure; match with errors.Is.
var (
	// ErrDamaged: the key file is not a key (truncated, edited, another
	// file). Sealed values cannot be opened until it is restored.
	ErrDamaged = errors.New("node key file is damaged")
	// ErrExposed: the key file can be read by group or others.
	ErrExposed = errors.New("node key file is readable by others")
	// ErrWrongKey: a sealed value does not open with this key (another
	// node's key, a key that was replaced) or was altered.
	ErrWrongKey = errors.New("sealed value does not open with this node's key")
	// ErrFormat: a sealed value is not in the "v1:..." form.
	ErrFormat = errors.New("not a sealed value")
)

// FileName is the key's file in the data directory.
const FileName = "node.key"

const (
	header    = "engenho-node-key-v1 "
	sealedV1  = "v1:"
	keyBytes  = 32
	nonceSize = 12
)

// Key is a loaded node key. Its methods are safe for concurrent use.
type Key struct {
	aead   cipher.AEAD
	macKey []byte
}

// LoadOrCreate reads the key at path, or creates it when there is none:
// 32 bytes from crypto/rand written to a temporary file (0600, fsync) and
// linked into place, so a crash leaves either no key or a whole one, and
// two processes racing to create it end up with the same key.
func LoadOrCreate(path string) (*Key, error) {
	k, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	if err := create(path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("node key %s: creating: %w", path, err)
	}
	return Load(path)
}

// Load reads the key at path. The file must be readable only by its owner
// (ErrExposed) and hold one key (ErrDamaged).
func Load(path string) (*Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("node key %s: mode %04o: %w; run chmod 600 %s", path, fi.Mode().Perm(), ErrExposed, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	raw, err := decodeFile(b)
	if err != nil {
		return nil, fmt.Errorf("node key %s: %w: restore it from a backup of the data directory", path, err)
	}
	return New(raw)
}

func decodeFile(b []byte) ([]byte, error) {
	s, ok := strings.CutPrefix(strings.TrimRight(string(b), "\n"), header)
	if !ok {
		return nil, fmt.Errorf("%w: no %q header", ErrDamaged, strings.TrimSpace(header))
	}
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != keyBytes {
		return nil, fmt.Errorf("%w: want %d hex-encoded bytes", ErrDamaged, keyBytes)
	}
	return raw, nil
}

// New makes a Key of 32 raw bytes (tests; Load for the daemon).
func New(raw []byte) (*Key, error) {
	if len(raw) != keyBytes {
		return nil, fmt.Errorf("node key: want %d bytes, got %d", keyBytes, len(raw))
	}
	block, err := aes.NewCipher(derive(raw, "engenho/seal/v1"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{aead: aead, macKey: derive(raw, "engenho/digest/v1")}, nil
}

func derive(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// create writes a fresh key to path; fs.ErrExist when one is there.
func create(path string) error {
	raw := make([]byte, keyBytes)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-"+FileName+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	_, err = tmp.WriteString(header + hex.EncodeToString(raw) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// link, not rename: it never replaces a key another process made.
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Seal encrypts plaintext under label; every call gives another sealed
// text (random nonce). Only Open with the same key and label reverses it.
func (k *Key) Seal(label, plaintext string) (string, error) {
	nonce := make([]byte, nonceSize, nonceSize+len(plaintext)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("node key: seal: %w", err)
	}
	out := k.aead.Seal(nonce, nonce, []byte(plaintext), []byte(label))
	return sealedV1 + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts what Seal wrote under label.
func (k *Key) Open(label, sealed string) (string, error) {
	s, ok := strings.CutPrefix(sealed, sealedV1)
	if !ok {
		return "", ErrFormat
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < nonceSize+k.aead.Overhead() {
		return "", ErrFormat
	}
	plain, err := k.aead.Open(nil, b[:nonceSize], b[nonceSize:], []byte(label))
	if err != nil {
		return "", ErrWrongKey
	}
	return string(plain), nil
}

// Digest is a keyed digest of label and plaintext (HMAC-SHA256, hex):
// the same on this node for the same value, useless for guessing the
// value without the key.
func (k *Key) Digest(label, plaintext string) string {
	m := hmac.New(sha256.New, k.macKey)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write([]byte(plaintext))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}
