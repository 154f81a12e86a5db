package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
)

// moveToAttic moves what aside to DATA/attic/TIMESTAMP (DMN-14), never
// deleting anything, and says where it went.
func (d *Daemon) moveToAttic(what string) (string, *JournalReinit, error) {
	if what == "journal" {
		r, err := ReinitJournal(context.Background(), d.dir, ReinitOptions{Bin: d.binary(), Clock: d.clk, Log: d.log.Logger})
		if err != nil {
			return r.Moved, nil, err
		}
		d.emit(messages.KindJournalReinit, messages.LevelWarn, "reinit journal: "+strings.Join(r.Summary(), "; "))
		return r.Moved, &r, nil
	}
	dest, err := d.reinitIdentity()
	if err == nil {
		d.emit(messages.KindJournalReinit, messages.LevelWarn, "reinit identity: the old identity is kept at "+dest+"; the next boot records a new one")
	}
	return dest, nil, err
}

// reinitIdentity moves the identity aside: the file DATA/control/
// identity.json into the attic, and the journal's record, written beside
// it as identity.json, is cleared. The next boot records a new one.
func (d *Daemon) reinitIdentity() (string, error) {
	dir := d.dir.Journal()
	if err := d.checkJournal(dir); err != nil {
		return "", fmt.Errorf("reinit identity: %w", err)
	}
	moved := ""
	if _, found, err := d.dir.ReadIdentity(); err != nil {
		return "", err
	} else if found {
		if moved, err = d.dir.MoveToAttic("identity"); err != nil {
			return "", fmt.Errorf("reinit identity: %w", err)
		}
	}
	j, err := journal.Open(journal.Options{Dir: dir, Clock: d.clk, Logger: d.log.With().Str("part", "journal").Logger()})
	if err != nil {
		return moved, fmt.Errorf("reinit identity: opening the journal: %w", err)
	}
	defer j.Close()
	id, found, err := j.Identity()
	if err != nil {
		return moved, fmt.Errorf("reinit identity: %w", err)
	}
	if !found {
		if moved == "" {
			return "", errors.New("reinit identity: no identity recorded")
		}
		return moved, nil
	}
	dest := filepath.Join(d.dir.Attic(), d.clk.Now().UTC().Format("20060102T150405.000Z"))
	if moved != "" {
		dest = filepath.Dir(filepath.Dir(moved)) // beside the file moved aside
	}
	if err := os.MkdirAll(dest, 0o700); err != nil {
		return moved, fmt.Errorf("reinit identity: %w", err)
	}
	file := filepath.Join(dest, "identity.json")
	b, _ := json.MarshalIndent(id, "", "  ")
	if err := os.WriteFile(file, append(b, '\n'), 0o600); err != nil {
		return moved, fmt.Errorf("reinit identity: %w", err)
	}
	if _, _, err := j.ClearIdentity(); err != nil {
		return moved, fmt.Errorf("reinit identity: clearing (the old one is kept at %s): %w", file, err)
	}
	return file, nil
}
