package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

const (
	checkChildEnv   = "ENGENHO_JOURNAL_CHECK_CHILD" // the journal dir
	checkSalvageEnv = "ENGENHO_JOURNAL_CHECK_SALVAGE"
)

// checkInChild runs Check (or Salvage) the way the daemon does: in a child
// process, here the test binary itself.
func checkInChild(t testing.TB, dir string, salvage bool) (ChildOutcome, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), checkChildEnv+"="+dir)
	if salvage {
		cmd.Env = append(cmd.Env, checkSalvageEnv+"=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return RunCheck(ctx, cmd, dir)
}

// Fixtures are built once per test binary and copied for each test.
var (
	fixtureOnce sync.Once
	fixtureRoot string
	fixtureErr  error
)

func removeFixtures() {
	if fixtureRoot != "" {
		_ = os.RemoveAll(fixtureRoot)
	}
}

// bigDefinition is a rendered stack large enough for the value log.
var bigDefinition = json.RawMessage(`{"x":"` + strings.Repeat("a", 40<<10) + `"}`)

// buildFixtures writes a closed journal with several tables and a value
// log ("healthy"), and one a SIGKILL left open, its records still in the
// write-ahead log ("crashed").
func buildFixtures(t testing.TB) {
	fixtureOnce.Do(func() {
		fixtureRoot, fixtureErr = os.MkdirTemp("", "engenho-journal-fixtures-")
		if fixtureErr != nil {
			return
		}
		healthy := filepath.Join(fixtureRoot, "healthy")
		j, err := Open(Options{Dir: healthy, small: true, NoSync: true})
		if err != nil {
			fixtureErr = err
			return
		}
		fixtureErr = fillFixture(j)
		if err := j.Close(); fixtureErr == nil {
			fixtureErr = err
		}
		if tables, _ := filepath.Glob(filepath.Join(healthy, "*.sst")); fixtureErr == nil && len(tables) < 3 {
			fixtureErr = fmt.Errorf("the healthy fixture has %d tables, the damage cases need 3", len(tables))
		}
	})
	if fixtureErr != nil {
		t.Fatalf("building fixtures: %v", fixtureErr)
	}
}

func fillFixture(j *Journal) error {
	if _, _, err := j.EnsureIdentity("node-a"); err != nil {
		return err
	}
	for i := range 30 {
		if _, err := j.RecordDeployment(fmt.Sprintf("s%d", i), Deployment{Definition: bigDefinition, Source: "socket"}); err != nil {
			return err
		}
	}
	if err := j.StopService("s1", "web"); err != nil {
		return err
	}
	for range 40_000 {
		j.Emit(messages.Event{Kind: "test.fill", Message: strings.Repeat("m", 100)})
	}
	_, err := j.Append()
	return err
}

// healthyJournal is a copy of the healthy fixture.
func healthyJournal(t testing.TB) string {
	t.Helper()
	buildFixtures(t)
	dst := filepath.Join(t.TempDir(), "journal")
	copyDir(t, filepath.Join(fixtureRoot, "healthy"), dst)
	return dst
}

// crashedJournal is a journal whose writer was SIGKILLed: its last
// records are only in the write-ahead log.
func crashedJournal(t *testing.T) (dir string, acked int) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "journal")
	_, acked = runAndKill(t, dir, "0")
	return dir, acked
}

// copyDir copies a journal, keeping the holes of sparse logs.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	noErr(t, os.MkdirAll(dst, 0o700))
	entries, err := os.ReadDir(src)
	noErr(t, err)
	for _, e := range entries {
		copySparse(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
	}
}

func copySparse(t testing.TB, src, dst string) {
	in, err := os.Open(src)
	noErr(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	noErr(t, err)
	defer out.Close()
	buf := make([]byte, 64<<10)
	var size int64
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if allZero(buf[:n]) {
				_, err = out.Seek(int64(n), io.SeekCurrent)
			} else {
				_, err = out.Write(buf[:n])
			}
			noErr(t, err)
			size += int64(n)
		}
		if err == io.EOF {
			break
		}
		noErr(t, err)
	}
	noErr(t, out.Truncate(size))
}

// files lists dir's files with a suffix, sorted, largest last when bySize.
func files(t testing.TB, dir, suffix string) []string {
	t.Helper()
	out, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	noErr(t, err)
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatalf("no *%s in %s", suffix, dir)
	}
	return out
}

func size(t testing.TB, path string) int64 {
	fi, err := os.Stat(path)
	noErr(t, err)
	return fi.Size()
}

func overwrite(t testing.TB, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	noErr(t, err)
	defer f.Close()
	_, err = f.WriteAt(b, off)
	noErr(t, err)
}

func pattern(n int) []byte { return []byte(strings.Repeat("GARBAGE!", n/8+1)[:n]) }

// logEntries lists the offsets of a log's good entries.
func logEntries(t testing.TB, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	noErr(t, err)
	var offs []int
	for off := logHeaderSize; ; {
		n, _, ok := decodeLogEntry(data, off)
		if !ok {
			return offs
		}
		offs = append(offs, off)
		off += n
	}
}

// middleOfLog damages the entry in the middle of the log with the most
// entries: records follow the damage.
func middleOfLog(t testing.TB, dir, suffix string) string {
	t.Helper()
	best, most := "", 0
	for _, p := range files(t, dir, suffix) {
		if n := len(logEntries(t, p)); n > most {
			best, most = p, n
		}
	}
	if most < 3 {
		t.Fatalf("no %s log with 3 entries in %s", suffix, dir)
	}
	offs := logEntries(t, best)
	overwrite(t, best, int64(offs[len(offs)/2]+2), pattern(24))
	return best
}

// damageCase is one kind of damage (REL-5) and what Check must say.
type damageCase struct {
	name   string
	crash  bool // on the crashed journal, not the healthy one
	damage func(t *testing.T, dir string) (file string)
	kind   DamageKind
	reason string // a substring of the reason
}

func damageCases() []damageCase {
	table := func(t *testing.T, dir string) string { return files(t, dir, ".sst")[1] }
	return []damageCase{
		{name: "sst bytes overwritten", kind: DamageCorrupt, reason: "table is damaged", damage: func(t *testing.T, dir string) string {
			p := table(t, dir)
			overwrite(t, p, size(t, p)/3, pattern(256))
			return p
		}},
		{name: "sst footer zeroed", kind: DamageCorrupt, reason: "table is damaged", damage: func(t *testing.T, dir string) string {
			p := table(t, dir)
			overwrite(t, p, size(t, p)-64, make([]byte, 64))
			return p
		}},
		{name: "sst empty", kind: DamageCorrupt, reason: "is empty", damage: func(t *testing.T, dir string) string {
			p := table(t, dir)
			noErr(t, os.Truncate(p, 0))
			return p
		}},
		{name: "sst truncated", kind: DamageCorrupt, reason: "table is damaged", damage: func(t *testing.T, dir string) string {
			p := table(t, dir)
			noErr(t, os.Truncate(p, size(t, p)/2))
			return p
		}},
		{name: "sst named by the MANIFEST missing", kind: DamageCorrupt, reason: "named by the MANIFEST but missing", damage: func(t *testing.T, dir string) string {
			p := table(t, dir)
			noErr(t, os.Remove(p))
			return p
		}},
		{name: "MANIFEST truncated", kind: DamageCorrupt, reason: "lost changes", damage: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, manifestName)
			noErr(t, os.Truncate(p, 20))
			return p
		}},
		{name: "MANIFEST truncated to half", kind: DamageCorrupt, reason: "lost changes", damage: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, manifestName)
			noErr(t, os.Truncate(p, size(t, p)/2))
			return p
		}},
		{name: "MANIFEST cut inside its header", kind: DamageCorrupt, reason: "bad magic", damage: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, manifestName)
			noErr(t, os.Truncate(p, 5))
			return p
		}},
		{name: "MANIFEST garbage", kind: DamageCorrupt, reason: "unreadable", damage: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, manifestName)
			noErr(t, os.WriteFile(p, pattern(int(size(t, p))), 0o600))
			return p
		}},
		{name: "MANIFEST missing", kind: DamageCorrupt, reason: "is missing", damage: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, manifestName)
			noErr(t, os.Remove(p))
			return p
		}},
		{name: "value log damaged in the middle", kind: DamageCorrupt, reason: "records that badger would drop follow", damage: func(t *testing.T, dir string) string {
			return middleOfLog(t, dir, ".vlog")
		}},
		{name: "value log truncated", kind: DamageCorrupt, reason: "missing or damaged", damage: func(t *testing.T, dir string) string {
			p := files(t, dir, ".vlog")[0]
			noErr(t, os.Truncate(p, size(t, p)/2))
			return p
		}},
		{name: "value log missing", kind: DamageCorrupt, reason: "no *.vlog file is left", damage: func(t *testing.T, dir string) string {
			noErr(t, os.Remove(files(t, dir, ".vlog")[0]))
			return dir
		}},
		{name: "KEYREGISTRY garbage", kind: DamageCorrupt, reason: "header is not badger's", damage: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, keyRegistryName)
			noErr(t, os.WriteFile(p, pattern(28), 0o600))
			return p
		}},
		{name: "write-ahead log damaged in the middle", crash: true, kind: DamageCorrupt, reason: "records that badger would drop follow", damage: func(t *testing.T, dir string) string {
			return middleOfLog(t, dir, ".mem")
		}},
		{name: "journal is a file", kind: DamageCorrupt, reason: "is not a directory", damage: func(t *testing.T, dir string) string {
			noErr(t, os.RemoveAll(dir))
			noErr(t, os.WriteFile(dir, []byte("not a journal\n"), 0o600))
			return dir
		}},
		{name: "journal directory immutable", kind: DamageUnwritable, reason: "cannot be written", damage: func(t *testing.T, dir string) string {
			chattr(t, "+i", dir)
			return dir
		}},
		{name: "MANIFEST immutable", kind: DamageUnwritable, reason: "cannot be written", damage: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, manifestName)
			chattr(t, "+i", p)
			return p
		}},
	}
}

// chattr sets a file attribute (root only) and clears it at cleanup. Root
// passes every permission check, so an immutable file is the way to make
// a journal it cannot write.
func chattr(t *testing.T, attr, path string) {
	t.Helper()
	if out, err := exec.Command("chattr", attr, path).CombinedOutput(); err != nil {
		t.Skipf("chattr %s %s: %v %s (needs root and chattr)", attr, path, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
}

// REL-5: every kind of damage is found by Check, in a child process that
// never crashes, as a DamageError that names the damaged file.
func TestREL5CheckFindsEveryDamage(t *testing.T) {
	for _, tc := range damageCases() {
		t.Run(tc.name, func(t *testing.T) {
			var dir string
			if tc.crash {
				dir, _ = crashedJournal(t)
			} else {
				dir = healthyJournal(t)
			}
			file := tc.damage(t, dir)
			out, err := checkInChild(t, dir, false)
			var de *DamageError
			if !errors.As(err, &de) {
				t.Fatalf("check: %v (%+v), want damage", err, out.Report)
			}
			if out.Crash != "" {
				t.Errorf("the check crashed; it must find the damage itself:\n%s", out.Crash)
			}
			t.Logf("%v", de)
			if de.Kind != tc.kind || !strings.Contains(de.Reason, tc.reason) {
				t.Errorf("damage %+v, want kind %s, reason with %q", de, tc.kind, tc.reason)
			}
			if got := de.File; got != file && !(got == "" && file == dir) {
				t.Errorf("damage names %q, want %q (%v)", got, file, de)
			}
			if want := map[DamageKind]error{DamageCorrupt: ErrCorrupt, DamageUnwritable: ErrUnwritable}[tc.kind]; !errors.Is(err, want) {
				t.Errorf("errors.Is(%v, %v) is false", err, want)
			}
		})
	}
}

// REL-5: a healthy journal and one a SIGKILL left open (its write-ahead
// log ends in a torn write) pass the check, and still hold every record
// afterwards: the check is not a false alarm after a crash.
func TestREL5CheckPassesHealthyAndCrashedJournals(t *testing.T) {
	dir := healthyJournal(t)
	out, err := checkInChild(t, dir, false)
	if err != nil || out.Report.Tables < 2 || out.Report.Records < 1000 {
		t.Fatalf("healthy: %v %+v", err, out.Report)
	}
	j, _ := openTest(t, dir, nil)
	if st, found := must2(j.Stack("s29")); !found || string(st.Current.Definition) != string(bigDefinition) {
		t.Fatalf("after the check the big definition is %d bytes (found %v)", len(st.Current.Definition), found)
	}

	crashed, acked := crashedJournal(t)
	if out, err := checkInChild(t, crashed, false); err != nil {
		t.Fatalf("crashed: %v %+v", err, out.Report)
	}
	j2, _ := openTest(t, crashed, nil)
	checkRounds(t, j2, acked)
}

// REL-5: a table a crash left behind (a compaction's output the MANIFEST
// does not name yet, its records also in the tables it names) is no
// damage: badger deletes it.
func TestREL5CheckToleratesLeftoverTable(t *testing.T) {
	dir := healthyJournal(t)
	copySparse(t, files(t, dir, ".sst")[0], filepath.Join(dir, "000099.sst"))
	if out, err := checkInChild(t, dir, false); err != nil {
		t.Fatalf("leftover table: %v %+v", err, out.Report)
	}
}

// A missing journal directory is a first boot, not damage.
func TestCheckAbsentDirIsFine(t *testing.T) {
	if _, err := checkInChild(t, filepath.Join(t.TempDir(), "journal"), false); err != nil {
		t.Fatal(err)
	}
}

// REL-5: repeated failed checks leave no descriptor behind in the caller
// (a failed badger.Open in-process leaks two per attempt).
func TestREL5FailedChecksLeakNoDescriptor(t *testing.T) {
	dir := healthyJournal(t)
	p := files(t, dir, ".sst")[1]
	overwrite(t, p, size(t, p)-64, make([]byte, 64))
	before := openFDs(t)
	for range 20 {
		if _, err := checkInChild(t, dir, false); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("check: %v", err)
		}
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d descriptors before 20 failed checks, %d after", before, after)
	}
}

func openFDs(t testing.TB) int {
	es, err := os.ReadDir("/proc/self/fd")
	noErr(t, err)
	return len(es)
}

// DMN-14: salvage hands over every intent of a journal whose files are
// sound (not its events or boot attempts) and skips a record whose value
// is damaged; from a damaged file it hands over nothing.
func TestSalvageKeepsIntentsNotHistory(t *testing.T) {
	dir := healthyJournal(t)
	out, err := checkInChild(t, dir, true)
	noErr(t, err)
	kinds := map[string]int{}
	for _, r := range out.Records {
		kinds[recordKind(r.Key)]++
	}
	if kinds["desired"] != 30 || kinds["stopped"] != 1 || kinds["identity"] != 1 || kinds["event"] != 0 || kinds["boot"] != 0 {
		t.Fatalf("salvaged %v", kinds)
	}
	if out.Report.Kept["desired"] != 30 || len(out.Report.Skipped) != 0 {
		t.Fatalf("report %+v", out.Report)
	}

	fresh, _ := openTest(t, filepath.Join(t.TempDir(), "new"), nil)
	n, err := fresh.Import(out.Records)
	noErr(t, err)
	if n != len(out.Records) || !must(fresh.IsStopped("s1", "web")) {
		t.Fatalf("imported %d of %d", n, len(out.Records))
	}
	if _, err := fresh.Import(out.Records); err != nil {
		t.Fatalf("a second import into a journal without events: %v", err)
	}

	broken := healthyJournal(t)
	p := files(t, broken, ".sst")[1]
	overwrite(t, p, size(t, p)-64, make([]byte, 64))
	out, err = checkInChild(t, broken, true)
	if !errors.Is(err, ErrCorrupt) || len(out.Records) != 0 {
		t.Fatalf("salvage of a damaged table: %v, %d records", err, len(out.Records))
	}
}

// DMN-5: a new journal adopts the identity the data directory kept; a
// journal with another node's identity is refused.
func TestAdoptIdentity(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	id := Identity{Name: "node-a", ID: "0123456789abcdef0123456789abcdef", CreatedAt: epoch}
	if adopted, err := j.AdoptIdentity(id); err != nil || !adopted {
		t.Fatalf("adopt: %v %v", adopted, err)
	}
	if got, found := must2(j.Identity()); !found || got.ID != id.ID {
		t.Fatalf("identity %+v", got)
	}
	if adopted, err := j.AdoptIdentity(id); err != nil || adopted {
		t.Fatalf("adopt again: %v %v", adopted, err)
	}
	var me *IdentityMismatchError
	if _, err := j.AdoptIdentity(Identity{Name: "node-b", ID: "ffff"}); !errors.As(err, &me) || me.Journal.ID != id.ID {
		t.Fatalf("another node's identity: %v", err)
	}
}
