package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/runtime/datadir"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/nodekey"
)

// JournalReinit is what `reinit journal` did (DMN-14, REL-5).
type JournalReinit struct {
	// Moved is where the journal went: DATA/attic/TIMESTAMP/journal.
	Moved string `json:"moved"`
	// Identity is the node identity the new journal keeps; empty when none
	// was known (the next boot records a new one).
	Identity journal.Identity `json:"identity"`
	// Salvaged counts the records carried into the new journal, by type
	// (desired, stopped, deploy-seq, ...).
	Salvaged map[string]int `json:"salvaged,omitempty"`
	// Skipped lists records whose value did not read back.
	Skipped []string `json:"skipped,omitempty"`
	// Unsealed lists the stacks whose desired state was left in the attic
	// because their secret env values do not open with DATA/node.key (the
	// key was lost and a new one made, SEC-2): carried over, they would
	// hold the next boot again. They must be applied again.
	Unsealed []string `json:"unsealed,omitempty"`
	// Lost says why nothing was salvaged (a damaged file); empty otherwise.
	Lost string `json:"lost,omitempty"`
}

// Summary is the reinit in one line per fact, for the CLI and the event.
func (r JournalReinit) Summary() []string {
	var out []string
	out = append(out, "moved aside to "+r.Moved)
	if r.Identity.ID != "" {
		out = append(out, fmt.Sprintf("kept the node identity %s (%s)", r.Identity.Name, r.Identity.ID))
	}
	if r.Lost != "" {
		out = append(out, "salvaged nothing: "+r.Lost)
	} else {
		kinds := make([]string, 0, len(r.Salvaged))
		for k, n := range r.Salvaged {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		}
		sort.Strings(kinds)
		if len(kinds) == 0 {
			kinds = []string{"nothing (the journal held no intents)"}
		}
		out = append(out, "salvaged "+strings.Join(kinds, ", "))
	}
	if len(r.Skipped) > 0 {
		out = append(out, fmt.Sprintf("skipped %d damaged records: %s", len(r.Skipped), strings.Join(r.Skipped, ", ")))
	}
	if len(r.Unsealed) > 0 {
		out = append(out, fmt.Sprintf("left stacks %s in the attic: their secret env values were sealed with another node key "+
			"than node.key; apply them again (the config's stack files are applied at the next boot)", strings.Join(r.Unsealed, ", ")))
	}
	out = append(out, "lost: the event log and the boot history (kept in the attic); "+
		"the next boot re-applies the stacks the config lists and adopts running workloads by their labels")
	return out
}

// ReinitOptions configure ReinitJournal.
type ReinitOptions struct {
	// Bin is the engenho binary the salvage runs as.
	Bin   string
	Clock clock.Clock
	Log   zerolog.Logger
}

// ReinitJournal moves DATA/journal aside to DATA/attic/TIMESTAMP and
// starts a new journal in its place, with the data directory's lock held
// (dir must be locked) and the journal closed. The new journal keeps the
// node identity (DATA/control/identity.json, else the old journal's), and
// the intents a child process could read back from the old one when its
// files are sound (journal.Salvage): stacks applied over the socket,
// stopped services, rollout progress, failed revisions, due times, owed
// lease releases. Events and boot attempts stay in the attic. Nothing is
// deleted.
func ReinitJournal(ctx context.Context, dir *datadir.Dir, opts ReinitOptions) (JournalReinit, error) {
	var r JournalReinit
	kept, keptFound, err := readKeptIdentity(dir)
	if err != nil {
		return r, err
	}
	if r.Moved, err = dir.MoveToAttic("journal"); err != nil {
		return r, err
	}
	records := salvage(ctx, &r, opts)
	records, r.Unsealed = withoutUnsealable(records, dir.NodeKeyPath(), r.Salvaged)
	if !keptFound {
		kept, keptFound = identityIn(records)
	}
	if keptFound {
		r.Identity = kept
	}
	if err := startJournal(dir.Journal(), kept, keptFound, records, opts.Clock); err != nil {
		return r, fmt.Errorf("reinit journal: moved aside to %s, but the new journal: %w", r.Moved, err)
	}
	if keptFound {
		if err := writeKeptIdentity(dir, kept); err != nil {
			return r, err
		}
	}
	return r, nil
}

// salvage runs journal.Salvage in a child on the journal moved aside.
func salvage(ctx context.Context, r *JournalReinit, opts ReinitOptions) []journal.Record {
	ctx, cancel := context.WithTimeout(ctx, reinitTimeout)
	defer cancel()
	out, err := journal.RunCheck(ctx, journal.CheckCommand(opts.Bin, r.Moved, true), r.Moved)
	if out.Crash != "" {
		path := filepath.Join(filepath.Dir(r.Moved), checkLog)
		if werr := os.WriteFile(path, []byte(out.Crash), 0o600); werr == nil {
			opts.Log.Warn().Str("file", path).Msg("the salvage crashed; its output is kept")
		}
	}
	if err != nil {
		r.Lost = err.Error()
		return nil
	}
	r.Salvaged, r.Skipped = out.Report.Kept, out.Report.Skipped
	return out.Records
}

// withoutUnsealable drops the salvaged desired state of every stack whose
// definitions do not open with the node key at keyPath, with that stack's
// stopped, rollout and failed records (its deployment counter stays, so
// ids are never reused), and takes them off the counts in salvaged.
// Sealed values are carried as they are: with the
// key that sealed them, everything is kept. A key file that is there but
// does not load (damaged, readable by others) drops nothing: the next boot
// says what is wrong with it, and putting it right keeps every secret.
func withoutUnsealable(records []journal.Record, keyPath string, salvaged map[string]int) ([]journal.Record, []string) {
	key, err := nodekey.Load(keyPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return records, nil
	}
	var k stackfile.NodeKey
	if key != nil {
		k = key
	}
	lost := map[string]bool{}
	var names []string
	for _, rec := range records {
		stack, ok := strings.CutPrefix(rec.Key, journal.PrefixDesired)
		if !ok || !unsealable(rec.Value, k) {
			continue
		}
		lost[stack] = true
		names = append(names, stack)
	}
	if len(lost) == 0 {
		return records, nil
	}
	out := records[:0:0]
	for _, rec := range records {
		if !lost[stackOfRecord(rec.Key)] {
			out = append(out, rec)
			continue
		}
		kind, _, _ := strings.Cut(strings.TrimPrefix(rec.Key, "v1/"), "/")
		if n, ok := salvaged[kind]; ok {
			salvaged[kind] = n - 1
			if n <= 1 {
				delete(salvaged, kind)
			}
		}
	}
	sort.Strings(names)
	return out, names
}

// unsealable: the desired-state record holds a definition whose sealed
// values key does not open (or there is no key to open them).
func unsealable(value []byte, key stackfile.NodeKey) bool {
	var st journal.StackState
	if json.Unmarshal(value, &st) != nil {
		return false
	}
	deps := []journal.Deployment{st.Current}
	if st.Previous != nil {
		deps = append(deps, *st.Previous)
	}
	for _, d := range deps {
		_, err := stackfile.Unmarshal(d.Definition, key)
		if errors.Is(err, nodekey.ErrWrongKey) || errors.Is(err, stackfile.ErrNoNodeKey) {
			return true
		}
	}
	return false
}

// stackOfRecord is the stack a desired, stopped, rollout or failed record
// belongs to; "" for any other.
func stackOfRecord(key string) string {
	for _, prefix := range []string{journal.PrefixDesired, journal.PrefixStopped, journal.PrefixRollout, journal.PrefixFailed} {
		if rest, ok := strings.CutPrefix(key, prefix); ok {
			stack, _, _ := strings.Cut(rest, "/")
			return stack
		}
	}
	return ""
}

// identityIn finds the old journal's identity among salvaged records.
func identityIn(records []journal.Record) (journal.Identity, bool) {
	for _, rec := range records {
		if rec.Key != journal.KeyIdentity {
			continue
		}
		var id journal.Identity
		if json.Unmarshal(rec.Value, &id) == nil && id.ID != "" && id.Name != "" {
			return id, true
		}
	}
	return journal.Identity{}, false
}

// startJournal creates the new journal: the identity first, then the
// salvaged records (the identity record among them is the kept one's).
func startJournal(path string, id journal.Identity, hasID bool, records []journal.Record, clk clock.Clock) error {
	j, err := journal.Open(journal.Options{Dir: path, Clock: clk})
	if err != nil {
		return err
	}
	if hasID {
		if _, err := j.AdoptIdentity(id); err != nil {
			return errors.Join(err, j.Close())
		}
	}
	var rest []journal.Record
	for _, rec := range records {
		if rec.Key != journal.KeyIdentity {
			rest = append(rest, rec)
		}
	}
	if _, err := j.Import(rest); err != nil {
		return errors.Join(err, j.Close())
	}
	return j.Close()
}

// ReinitJournalOffline is `engenho reinit journal` without a daemon: it
// takes the data directory's lock (DMN-2), so it never races a daemon
// starting on it, and holds it through the move.
func ReinitJournalOffline(ctx context.Context, dataDir string, opts ReinitOptions) (JournalReinit, error) {
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if _, err := os.Stat(filepath.Join(dataDir, "journal")); err != nil {
		return JournalReinit{}, fmt.Errorf("reinit journal: %w", err)
	}
	dir, err := datadir.Open(dataDir, opts.Clock)
	if err != nil {
		return JournalReinit{}, err
	}
	if err := dir.Lock(); err != nil {
		return JournalReinit{}, err
	}
	defer dir.Unlock()
	return ReinitJournal(ctx, dir, opts)
}
