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
	err = j.update(func(txn *writeTxn) error {
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
	err = j.update(func(txn *writeTxn) error {
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

// IdentityMismatchError: the journal holds another node's identity than
// the one the data directory keeps beside it (DATA/control/identity.json).
type IdentityMismatchError struct {
	Journal, Kept Identity
}

func (e *IdentityMismatchError) Error() string {
	return fmt.Sprintf("the journal belongs to node %s (%s), the data directory to node %s (%s)",
		e.Journal.Name, e.Journal.ID, e.Kept.Name, e.Kept.ID)
}

// AdoptIdentity makes want the journal's identity when it has none (a
// journal made new by `reinit journal` keeps the node's identity, DMN-5);
// a recorded identity must be want, else *IdentityMismatchError. Synced.
func (j *Journal) AdoptIdentity(want Identity) (adopted bool, err error) {
	if want.Name == "" || want.ID == "" {
		return false, invalid("identity", "name and id are required")
	}
	err = j.update(func(txn *writeTxn) error {
		var cur Identity
		found, err := getJSON(txn, []byte(KeyIdentity), &cur)
		if err != nil {
			return err
		}
		if found {
			if cur.ID != want.ID {
				return &IdentityMismatchError{Journal: cur, Kept: want}
			}
			return nil
		}
		adopted = true
		return setJSON(txn, []byte(KeyIdentity), want)
	})
	if err != nil {
		return false, fmt.Errorf("journal: identity: %w", err)
	}
	return adopted, nil
}
