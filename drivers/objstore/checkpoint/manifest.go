package checkpoint

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/engenho/engenho/drivers/objstore"
)

// ManifestVersion is the manifest format version.
const ManifestVersion = 1

const maxManifestBytes = 64 << 10

// Manifest is the content of manifest.json.
type Manifest struct {
	Version int    `json:"v"`
	Host    string `json:"host"`
	// Holder, Node and Epoch are the lease of the last writer (Claim or
	// Save).
	Holder  string    `json:"holder"`
	Node    string    `json:"node"`
	Epoch   uint64    `json:"epoch"`
	Written time.Time `json:"written"`
	// Current is the checkpoint to restore; nil before the first Save.
	Current *Entry `json:"current"`
	// History holds older checkpoints still kept, newest first.
	History []Entry `json:"history,omitempty"`
}

// Entry describes one archive.
type Entry struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"` // hex, of the archive object's bytes
	// CRC32C (hex) is what a restore checks the object with (sum.go);
	// empty in checkpoints written before it was recorded.
	CRC32C string `json:"crc32c,omitempty"`
	Size   int64  `json:"size"` // bytes of the archive object
	// Unpacked is the total size of the files inside; extraction refuses
	// to write more.
	Unpacked int64     `json:"unpacked"`
	Files    int       `json:"files"`
	Format   Format    `json:"format"`
	Created  time.Time `json:"created"`
	Node     string    `json:"node"`
	Epoch    uint64    `json:"epoch"`
}

// Format is an archive format.
type Format string

// The formats.
const (
	Tar   Format = "tar"
	TarGz Format = "tar.gz"
	// Cas is an index of the tree plus content-addressed blobs (ACT-15).
	Cas Format = "cas"
)

func (f Format) valid() bool { return f == Tar || f == TarGz || f == Cas }

func (m Manifest) encode() []byte {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("checkpoint: encoding a manifest cannot fail: %v", err))
	}
	return append(data, '\n')
}

// DecodeManifest parses and validates a manifest.
func DecodeManifest(data []byte) (Manifest, error) {
	if len(data) > maxManifestBytes {
		return Manifest{}, fmt.Errorf("manifest is %d bytes, over %d", len(data), maxManifestBytes)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("manifest: %w", err)
	}
	if dec.More() {
		return Manifest{}, fmt.Errorf("manifest: trailing data")
	}
	if m.Version != ManifestVersion {
		return Manifest{}, fmt.Errorf("manifest: version %d, want %d", m.Version, ManifestVersion)
	}
	if err := objstore.ValidName(m.Host); err != nil {
		return Manifest{}, fmt.Errorf("manifest: host: %w", err)
	}
	entries := m.History
	if m.Current != nil {
		entries = append([]Entry{*m.Current}, entries...)
	}
	for _, e := range entries {
		if err := e.validate(); err != nil {
			return Manifest{}, fmt.Errorf("manifest: entry %q: %w", e.Key, err)
		}
	}
	return m, nil
}

func (e Entry) validate() error {
	if err := objstore.ValidKey(e.Key); err != nil {
		return err
	}
	if sum, err := hex.DecodeString(e.SHA256); err != nil || len(sum) != 32 {
		return fmt.Errorf("sha256 %q is not 64 hex digits", e.SHA256)
	}
	if e.CRC32C != "" && !validCRC(e.CRC32C) {
		return fmt.Errorf("crc32c %q is not 8 hex digits", e.CRC32C)
	}
	if e.Size < 0 || e.Unpacked < 0 || e.Files < 0 {
		return fmt.Errorf("negative size")
	}
	if !e.Format.valid() {
		return fmt.Errorf("format %q unknown", e.Format)
	}
	return nil
}

// keys lists every archive key the manifest references.
func (m Manifest) keys() map[string]bool {
	keys := map[string]bool{}
	if m.Current != nil {
		keys[m.Current.Key] = true
	}
	for _, e := range m.History {
		keys[e.Key] = true
	}
	return keys
}
