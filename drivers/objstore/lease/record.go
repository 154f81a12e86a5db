package lease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode"

	"github.com/engenho/engenho/drivers/objstore"
)

// RecordVersion is the format version written in every record.
const RecordVersion = 1

// Limits on a decoded record.
const (
	maxRecordBytes = 4096
	maxHolderLen   = 256
	maxTTL         = 24 * time.Hour
)

// Record is the content of lease.json.
type Record struct {
	Version int    `json:"v"`
	Holder  string `json:"holder"` // the daemon run holding it (unique per run)
	Node    string `json:"node"`   // the node that daemon runs on
	Epoch   uint64 `json:"epoch"`  // +1 on every change of holder
	// Expiry is when the holder's lease ends by the holder's clock.
	Expiry time.Time `json:"expiry"`
	// TTLMillis is the holder's TTL; a taker waits at least this long.
	TTLMillis int64 `json:"ttl_ms"`
	// Released marks a lease its holder gave up: free to take at once.
	Released bool `json:"released,omitempty"`
}

// TTL is the record's TTL as a duration.
func (r Record) TTL() time.Duration { return time.Duration(r.TTLMillis) * time.Millisecond }

// Encode renders the record as JSON.
func (r Record) Encode() []byte {
	r.Expiry = r.Expiry.UTC()
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("lease: encoding a record cannot fail: %v", err))
	}
	return append(data, '\n')
}

// Decode parses and validates a lease record.
func Decode(data []byte) (Record, error) {
	if len(data) > maxRecordBytes {
		return Record{}, fmt.Errorf("lease record is %d bytes, over %d", len(data), maxRecordBytes)
	}
	var r Record
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("lease record: %w", err)
	}
	if dec.More() {
		return Record{}, fmt.Errorf("lease record: trailing data after the JSON object")
	}
	if err := r.validate(); err != nil {
		return Record{}, fmt.Errorf("lease record: %w", err)
	}
	r.Expiry = r.Expiry.UTC()
	return r, nil
}

func (r Record) validate() error {
	switch {
	case r.Version != RecordVersion:
		return fmt.Errorf("version %d, want %d", r.Version, RecordVersion)
	case r.Epoch == 0:
		return fmt.Errorf("epoch 0")
	case r.Expiry.IsZero():
		return fmt.Errorf("no expiry")
	case r.TTLMillis <= 0 || r.TTL() > maxTTL:
		return fmt.Errorf("ttl %dms out of range (0, %s]", r.TTLMillis, maxTTL)
	}
	if err := validHolder(r.Holder); err != nil {
		return err
	}
	return objstore.ValidName(r.Node)
}

func validHolder(h string) error {
	if h == "" || len(h) > maxHolderLen {
		return fmt.Errorf("holder must be 1..%d bytes", maxHolderLen)
	}
	for _, c := range h {
		if !unicode.IsPrint(c) || c == unicode.ReplacementChar {
			return fmt.Errorf("holder has a non-printable character")
		}
	}
	return nil
}
