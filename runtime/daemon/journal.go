package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/datadir"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// A damaged journal is a state, not a crash (REL-5): before the journal
// is handed to badger in this process, a child process of the same
// binary checks it (journal.Check); badger's panics and a failed open's
// leaks end with the child. A damaged journal fails the boot with class
// corrupt and the daemon holds, saying which file and what to run.

// checkLog is where the output of a check that crashed is kept:
// DATA/control/journal-check.log (a Go trace; it is never logged).
const checkLog = "journal-check.log"

// journalDamage is a journal (or the node key that opens its sealed
// values) the daemon cannot use, with what the operator
// does about it.
type journalDamage struct {
	err  error // *journal.DamageError, *journal.IdentityMismatchError or a nodekey error
	hint string
}

func (e journalDamage) Error() string { return e.err.Error() + "; " + e.hint }
func (e journalDamage) Unwrap() error { return e.err }

// damage wraps a journal problem with the command that recovers from it.
func (d *Daemon) damage(err error) error {
	var de *journal.DamageError
	if errors.As(err, &de) && de.Kind == journal.DamageUnwritable {
		return journalDamage{err: err, hint: "make it writable (check the mount, `lsattr -d`, owner and mode), then run `engenho retry`"}
	}
	return journalDamage{err: err, hint: fmt.Sprintf("the daemon holds; `engenho reinit journal` moves %s to %s and starts a new journal "+
		"(the node keeps its identity, running workloads are adopted)", d.dir.Journal(), d.dir.Attic())}
}

// binary is the engenho binary the check runs as.
func (d *Daemon) binary() string {
	if d.opts.Bin != "" {
		return d.opts.Bin
	}
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return os.Args[0]
}

// checkJournal runs the check in a child process, bounded by the boot's
// step timeout.
func (d *Daemon) checkJournal(dir string) error {
	if d.skipJournalCheck(d.settings) {
		d.log.Warn().Msg("chaos: the journal is opened unchecked (planted bug)")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.settings.StepTimeout)
	defer cancel()
	out, err := journal.RunCheck(ctx, journal.CheckCommand(d.binary(), dir, false), dir)
	if out.Crash != "" {
		d.keepCrash(d.dir.Control(), out.Crash)
	}
	d.log.Debug().Dur("took", out.Took).Int("tables", out.Report.Tables).Int("records", out.Report.Records).Msg("journal checked")
	var de *journal.DamageError
	if errors.As(err, &de) {
		return d.damage(err)
	}
	return err
}

// keepCrash writes a crashed check's output where the operator can find
// it (dir/journal-check.log), so no Go trace reaches the daemon's log.
func (d *Daemon) keepCrash(dir, output string) {
	path := filepath.Join(dir, checkLog)
	if err := os.WriteFile(path, []byte(output), 0o600); err != nil {
		d.log.Warn().Err(err).Str("file", path).Msg("keeping the journal check's crash output")
		return
	}
	d.log.Warn().Str("file", path).Msg("the journal check crashed; its output is kept")
}

func (d *Daemon) openJournal() (func(), error) {
	s := d.settings
	dir := d.dir.Journal()
	// The check opens and closes the journal: read how the previous run
	// left it first.
	prev := journal.ReadPreviousClose(dir)
	// The check and badger write as they open: on a full disk badger's
	// mapped logs would kill the check with SIGBUS, and a crashed check
	// reads as damage. Too little room is a passing fault: retried.
	if err := journal.CheckSpace(d.dir.Root(), s.JournalReserve); err != nil {
		return nil, fmt.Errorf("opening the journal: %w", err)
	}
	if err := d.checkJournal(dir); err != nil {
		return nil, err
	}
	j, err := journal.Open(journal.Options{Dir: dir, Clock: d.clk, Logger: d.log.With().Str("part", "journal").Logger(),
		Retention: journal.Retention{MaxEvents: s.EventsMaxCount, MaxAge: s.EventsMaxAge}, Previous: &prev, Reserve: s.JournalReserve,
		KeepFailedWrites: d.keepFailedWrites(s)})
	if err != nil {
		var le *journal.LockedError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("opening the journal: %w", err)
		}
		// The check opened it a moment ago; badger failing now is no
		// passing fault, and every failed open leaks what badger opened.
		return nil, d.damage(&journal.DamageError{Kind: journal.DamageCorrupt, Dir: dir,
			Reason: "badger cannot open it although the check could: " + err.Error()})
	}
	id, created, err := d.nodeIdentity(j, s.NodeName, prev)
	if err != nil {
		_ = j.Close()
		return nil, err
	}
	if err := d.dir.MarkLive(string(lifecycle.PhaseOpenJournal)); err != nil {
		_ = j.Close()
		return nil, fmt.Errorf("run marker: %w", err)
	}
	return func() {
		d.parts.journal = j
		d.parts.sink = eventSink{j: j, log: d.log.With().Str("part", "events").Logger(), extra: d.countEvent, actors: newActors()}
		for _, ev := range d.mem.take() {
			ev.Seq = 0
			_ = j.Emit(ev) // the events of the time the journal was closed
		}
		snap := *d.snap.Load()
		snap.Node = id
		d.snap.Store(&snap)
		if created {
			d.emit(messages.KindDaemonBooted, messages.LevelInfo, fmt.Sprintf("first boot of node %s (%s)", id.Name, id.ID))
		}
		if prev := snap.PreviousRun; prev.Outcome == "crashed" {
			d.emit(messages.KindDaemonCrashed, messages.LevelWarn, "the previous run did not release the journal: "+prev.Detail)
		}
	}, nil
}

// nodeIdentity is the node's identity (DMN-5). It is kept twice: in the
// journal and in DATA/control/identity.json, so a journal that `reinit
// journal` made new keeps the node's name and id. The two must agree; a
// journal that holds records but lost the identity it recorded at first
// boot lost records.
func (d *Daemon) nodeIdentity(j *journal.Journal, name string, prev journal.PreviousClose) (journal.Identity, bool, error) {
	kept, found, err := readKeptIdentity(d.dir)
	if err != nil {
		return journal.Identity{}, false, err
	}
	if !found {
		id, created, err := j.EnsureIdentity(name)
		if err != nil {
			return id, false, fmt.Errorf("node identity: %w", err)
		}
		return id, created, writeKeptIdentity(d.dir, id)
	}
	adopted, err := j.AdoptIdentity(kept)
	var me *journal.IdentityMismatchError
	switch {
	case errors.As(err, &me):
		return kept, false, journalDamage{err: err, hint: fmt.Sprintf("`engenho reinit journal` starts a new journal for this node; "+
			"or put back the %s that goes with this journal", d.dir.IdentityPath())}
	case err != nil:
		return kept, false, fmt.Errorf("node identity: %w", err)
	case adopted && prev.State != journal.FirstOpen && holdsRecords(j):
		return kept, false, d.damage(&journal.DamageError{Kind: journal.DamageCorrupt, Dir: j.Dir(),
			Reason: "it lost the node identity it recorded at first boot, and with it an unknown number of records"})
	}
	return kept, false, nil
}

// holdsRecords reports whether j holds a record besides the identity.
func holdsRecords(j *journal.Journal) bool {
	found := errors.New("found")
	err := j.Walk("", func(r journal.Record) error {
		if r.Key != journal.KeyIdentity {
			return found
		}
		return nil
	})
	return errors.Is(err, found)
}

func readKeptIdentity(dir *datadir.Dir) (journal.Identity, bool, error) {
	b, found, err := dir.ReadIdentity()
	if err != nil || !found {
		return journal.Identity{}, false, err
	}
	var id journal.Identity
	if err := json.Unmarshal(b, &id); err != nil || id.ID == "" || id.Name == "" {
		return journal.Identity{}, false, configError{fmt.Errorf("%s does not hold a node identity (%v): "+
			"remove it to take the journal's, or put the right one back", dir.IdentityPath(), err)}
	}
	return id, true, nil
}

func writeKeptIdentity(dir *datadir.Dir, id journal.Identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return dir.WriteIdentity(append(b, '\n'))
}

// loadKeptIdentity is the node as the data directory knows it, for status
// before (or without) a journal.
func loadKeptIdentity(dir *datadir.Dir) journal.Identity {
	id, _, _ := readKeptIdentity(dir)
	return id
}

// reinitTimeout bounds the salvage of a journal moved aside; the loop
// waits for it, so it is short.
const reinitTimeout = 20 * time.Second
