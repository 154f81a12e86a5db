package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// identityName is the node identity kept beside the journal (DMN-5): the
// journal records it too, but a damaged journal moved aside by `reinit
// journal` must not take the node's name and id with it.
const identityName = "identity.json"

// IdentityPath is DATA/control/identity.json.
func (d *Dir) IdentityPath() string { return filepath.Join(d.Control(), identityName) }

// ReadIdentity returns the identity file's content; found is false when
// there is none (a first boot, or a data directory older than the file).
// Reading needs no lock.
func (d *Dir) ReadIdentity() (data []byte, found bool, err error) {
	data, err = os.ReadFile(d.IdentityPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("datadir %s: identity: %w", d.root, err)
	}
	return data, true, nil
}

// WriteIdentity replaces the identity file atomically.
func (d *Dir) WriteIdentity(data []byte) error {
	if err := d.requireLock(); err != nil {
		return err
	}
	if err := writeFileAtomic(d.Control(), identityName, data); err != nil {
		return fmt.Errorf("datadir %s: identity: %w", d.root, err)
	}
	return nil
}
