package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/engenho/engenho/runtime/journal"
)

// moveToAttic moves what aside to DATA/attic/TIMESTAMP (DMN-14), never
// deleting anything. The journal is a directory that moves as a whole; the
// node identity is a record inside it, written to the attic as
// identity.json before it is cleared, so the next boot records a new one.
func (d *Daemon) moveToAttic(what string) (string, error) {
	if what != "identity" {
		return d.dir.MoveToAttic(what)
	}
	j, err := journal.Open(journal.Options{Dir: d.dir.Journal(), Clock: d.clk, Logger: d.log.With().Str("part", "journal").Logger()})
	if err != nil {
		return "", fmt.Errorf("reinit identity: opening the journal: %w", err)
	}
	defer j.Close()
	id, found, err := j.Identity()
	if err != nil || !found {
		return "", fmt.Errorf("reinit identity: no identity recorded (%v)", err)
	}
	dest := filepath.Join(d.dir.Attic(), d.clk.Now().UTC().Format("20060102T150405.000Z"))
	if err := os.MkdirAll(dest, 0o700); err != nil {
		return "", fmt.Errorf("reinit identity: %w", err)
	}
	file := filepath.Join(dest, "identity.json")
	b, _ := json.MarshalIndent(id, "", "  ")
	if err := os.WriteFile(file, append(b, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("reinit identity: %w", err)
	}
	if _, _, err := j.ClearIdentity(); err != nil {
		return "", fmt.Errorf("reinit identity: clearing (the old one is kept at %s): %w", file, err)
	}
	return file, nil
}
