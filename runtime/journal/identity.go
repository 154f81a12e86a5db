package journal

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Identity is the node's identity, recorded on first boot (DMN-5).
type Identity struct {
	Name      string    `json:"name"`
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
}

// EnsureIdentity returns the recorded identity, or on first boot records a
// new one with this name and a random 128-bit id (created = true). A
// recorded identity is returned as it is even if name differs: the caller
// decides what a renamed node means. Synced.
func (j *Journal) EnsureIdentity(name string) (id Identity, created bool, err error) {
	if name == "" {
		return Identity{}, false, invalid("identity name", "empty")
	}
	err = j.update(func(txn *badger.Txn) error {
		found, err := getJSON(txn, []byte(KeyIdentity), &id)
		if err != nil || found {
			return err
		}
		raw := make([]byte, 16)
		if _, err := rand.Read(raw); err != nil {
			return fmt.Errorf("random id: %w", err)
		}
		id = Identity{Name: name, ID: hex.EncodeToString(raw), CreatedAt: j.opts.Clock.Now()}
		created = true
		return setJSON(txn, []byte(KeyIdentity), id)
	})
	if err != nil {
		return Identity{}, false, fmt.Errorf("journal: identity: %w", err)
	}
	return id, created, nil
}

// Identity returns the recorded identity, if any.
func (j *Journal) Identity() (id Identity, found bool, err error) {
	err = j.read(func(txn *badger.Txn) error {
		found, err = getJSON(txn, []byte(KeyIdentity), &id)
		return err
	})
	if err != nil {
		return Identity{}, false, fmt.Errorf("journal: identity: %w", err)
	}
	return id, found, nil
}

// ClearIdentity removes the identity and returns what it was, so that
// `reinit identity` (DMN-14) can set it aside in the attic. Synced.
func (j *Journal) ClearIdentity() (old Identity, found bool, err error) {
	err = j.update(func(txn *badger.Txn) error {
		found, err = getJSON(txn, []byte(KeyIdentity), &old)
		if err != nil || !found {
			return err
		}
		return txn.Delete([]byte(KeyIdentity))
	})
	if err != nil {
		return Identity{}, false, fmt.Errorf("journal: clear identity: %w", err)
	}
	return old, found, nil
}
