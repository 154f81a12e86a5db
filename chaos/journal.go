package chaos

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/schedule"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// The journal faults (REL-5). journal.corrupt stops node a's daemon
// (SIGKILL for a write-ahead log damage, else a clean exit, after which
// badger has written a table), damages one file of its journal, and starts
// it again on the damage. The daemon must hold (failed/hold, class
// corrupt) naming the file and `engenho reinit journal`, with no Go trace;
// the campaign then runs that command as an operator would, and re-applies
// the stacks it had applied over the socket (nothing of a damaged journal
// is salvaged, so its intents are lost, and the campaign forgets them too).
// Every workload must be running again, adopted: the untouched invariant
// sees the same pids. journal.readonly makes the journal directory
// immutable instead; the daemon names it and `engenho retry`, the campaign
// makes it writable again and retries, and nothing is lost.

const (
	reinitCommand = "engenho reinit journal"
	retryCommand  = "engenho retry"
	// heldWithin bounds a daemon's boot to its held state.
	heldWithin = 30 * time.Second
)

func (c *campaign) injectJournal(ctx context.Context, f schedule.Fault, inj *injected) error {
	n := c.a
	jdir := filepath.Join(n.dataDir(), "journal")
	logFrom := fileLen(n.logPath())
	kill := f.Params["damage"] == "wal" || f.Param("kill") == 1
	var file, command string
	stop := func() error { return c.stopForJournal(ctx, n, kill) }
	if _, err := n.relaunch(inj, stop, func() error {
		var detail string
		var err error
		if file, command, detail, err = damageJournal(jdir, f); err != nil {
			_ = n.launch()
			return err
		}
		inj.target, inj.detail = file, detail
		return nil
	}); err != nil {
		return err
	}
	st, err := waitHeld(ctx, n)
	if err != nil {
		inj.violations = append(inj.violations, invariant.Violation{Invariant: invariant.Told, Subject: "node " + n.name, Safety: true, Evidence: err.Error()})
	} else {
		inj.violations = append(inj.violations, invariant.CheckTold(n.name, st, file, command)...)
	}
	note, err := c.recoverJournal(ctx, n, jdir, command, inj)
	if note != "" {
		inj.detail += "; " + note
	}
	inj.violations = append(inj.violations, invariant.CheckNoTrace(n.name, readFrom(n.logPath(), logFrom), n.alive())...)
	return err
}

// stopForJournal ends the daemon: SIGKILL, or a clean exit.
func (c *campaign) stopForJournal(ctx context.Context, n *node, kill bool) error {
	if kill {
		return n.kill()
	}
	return n.exit(ctx, 40*time.Second)
}

// recoverJournal is the operator's part: the command the daemon named.
func (c *campaign) recoverJournal(ctx context.Context, n *node, jdir, command string, inj *injected) (string, error) {
	if command == retryCommand {
		if err := thaw(jdir); err != nil {
			return "", err
		}
		if _, err := c.cli(ctx, n, "retry"); err != nil {
			return "", err
		}
		return "thawed, retried", n.waitRunning(ctx, 90*time.Second)
	}
	out, err := c.cli(ctx, n, "--json", "reinit", "journal", "--yes")
	if err != nil {
		return "", err
	}
	var res control.ReinitResult
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &res); err != nil {
		return "", fmt.Errorf("reinit journal: %w: %s", err, out)
	}
	if err := n.waitRunning(ctx, 90*time.Second); err != nil {
		return "", err
	}
	if res.Lost == "" {
		return fmt.Sprintf("reinit salvaged %v", res.Salvaged), nil
	}
	// Nothing salvaged: the journal's intents are gone. The operator
	// applies the stacks again, at the replica counts it had asked for;
	// stopped services run again until stopped anew.
	for i := range c.want.Services {
		c.want.Services[i].Stopped, c.want.Services[i].StoppedAt = false, time.Time{}
	}
	if sw, ok := c.want.Service(svcWeb); ok {
		c.stacks.webReps = sw.Replicas
	}
	var files []control.ApplyFile
	for _, f := range c.stacks.files() {
		files = append(files, control.ApplyFile{Name: f[0], Content: f[1]})
	}
	was := map[string]string{}
	for _, sw := range c.want.Services {
		was[sw.Service] = sw.Revision
	}
	acks, err := c.apply(ctx, n, files)
	inj.acks = append(inj.acks, acks...)
	// A service redeployed before (its revision marked "-rN") runs a
	// revision the file does not name: the new journal knows only the
	// file's, and rolls the service out to it, as it must.
	for _, a := range acks {
		if a.What == "revision" && was[a.Service] != "" && was[a.Service] != a.Value {
			inj.touch(a.Service, 0)
		}
	}
	return "reinit salvaged nothing; stacks applied again", err
}

// healJournal brings back a node a journal fault left held: the journal
// made writable again, then a reinit if it is still damaged, else a retry.
func (c *campaign) healJournal(ctx context.Context) {
	jdir := filepath.Join(c.a.dataDir(), "journal")
	_ = thaw(jdir)
	st, err := c.a.status(ctx)
	if err != nil || st.Daemon.Lifecycle.Name != lifecycle.Failed {
		return
	}
	if le := st.Daemon.Lifecycle.LastError; le != nil && le.Class == lifecycle.CauseCorrupt && strings.Contains(le.Error(), reinitCommand) {
		_, _ = c.recoverJournal(ctx, c.a, jdir, reinitCommand, &injected{})
		return
	}
	_, _ = c.cli(ctx, c.a, "retry")
}

// cli runs an engenho client command against n's data directory.
func (c *campaign) cli(ctx context.Context, n *node, args ...string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, n.bin, append([]string{"--data-dir", n.dataDir()}, args...)...)
	cmd.Env = n.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("engenho %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// waitHeld waits for the daemon to settle after a boot on a damaged
// journal; a daemon that runs on it, or exits, is an error.
func waitHeld(ctx context.Context, n *node) (lifecycle.State, error) {
	deadline := time.Now().Add(heldWithin)
	var last lifecycle.State
	for time.Now().Before(deadline) {
		if !n.alive() {
			return last, fmt.Errorf("the daemon exited on a damaged journal (see %s)", n.logPath())
		}
		st, err := n.status(ctx)
		if err == nil {
			last = st.Daemon.Lifecycle
			switch last.Name {
			case lifecycle.Failed:
				return last, nil
			case lifecycle.Running:
				return last, errors.New("the daemon runs on a damaged journal")
			}
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return last, err
		}
	}
	return last, fmt.Errorf("not held within %s: %s", heldWithin, last)
}

// damageJournal damages the journal in dir (its daemon down) as the fault
// says; it returns the file, the command the daemon must name, and a note.
func damageJournal(dir string, f schedule.Fault) (file, command, detail string, err error) {
	if f.Kind == schedule.JournalReadonly {
		if err := freeze(dir); err != nil {
			return "", "", "", errSkip{"the journal cannot be made immutable: " + err.Error()}
		}
		return dir, retryCommand, "journal directory immutable (chattr +i)", nil
	}
	kind := f.Params["damage"]
	file, err = damageFile(dir, kind)
	if errors.Is(err, errNoSuchFile) {
		// A journal too young for this damage (no table yet, a write-ahead
		// log with a single record): overwrite the MANIFEST instead.
		detail = kind + " impossible (" + err.Error() + "), so manifest-junk"
		kind = "manifest-junk"
		file, err = damageFile(dir, kind)
	}
	if detail == "" {
		detail = kind
	}
	return file, reinitCommand, detail, err
}

var errNoSuchFile = errors.New("no file to damage")

func damageFile(dir, kind string) (string, error) {
	switch kind {
	case "manifest-cut", "manifest-junk":
		p := filepath.Join(dir, "MANIFEST")
		if kind == "manifest-cut" {
			return p, os.Truncate(p, 10)
		}
		sz := fileLen(p)
		return p, os.WriteFile(p, bytes.Repeat([]byte("GARBAGE!"), int(sz/8)+1)[:sz], 0o600)
	case "wal":
		p, _ := largest(dir, ".mem")
		b, _ := os.ReadFile(p)
		if p == "" || !twoEntries(b) {
			return "", fmt.Errorf("%w: the write-ahead log holds fewer than two records", errNoSuchFile)
		}
		// The first record's key: badger would drop every record after it.
		return p, writeAt(p, logHeader+2, []byte("GARBAGE!GARBAGE!"))
	}
	p, size := largest(dir, ".sst")
	if p == "" {
		return "", fmt.Errorf("%w: no table yet", errNoSuchFile)
	}
	switch kind {
	case "sst-bytes":
		return p, writeAt(p, size/3, bytes.Repeat([]byte("GARBAGE!"), 8))
	case "sst-footer":
		return p, writeAt(p, size-64, make([]byte, 64))
	case "sst-cut":
		return p, os.Truncate(p, size/2)
	case "sst-empty":
		return p, os.Truncate(p, 0)
	case "sst-missing":
		return p, os.Remove(p)
	}
	return "", fmt.Errorf("unknown journal damage %q", kind)
}

// logHeader is the size of a badger log's header; entries follow.
const logHeader = 20

// twoEntries reports whether a badger log holds a second entry after its
// first: each is meta, user meta, uvarint key and value lengths and
// expiry, the key, the value and a 4-byte checksum.
func twoEntries(b []byte) bool {
	next := func(off int) (int, bool) {
		if off+2 >= len(b) {
			return 0, false
		}
		p := off + 2
		var lens [3]uint64
		for i := range lens {
			v, n := binary.Uvarint(b[p:])
			if n <= 0 {
				return 0, false
			}
			lens[i], p = v, p+n
		}
		if lens[0] == 0 || lens[0] > 1<<16 || lens[1] > uint64(len(b)) {
			return 0, false
		}
		end := p + int(lens[0]) + int(lens[1]) + 4
		return end, end <= len(b)
	}
	second, ok := next(logHeader)
	if !ok {
		return false
	}
	_, ok = next(second)
	return ok
}

// largest is the file of dir with suffix holding the most data (for a
// preallocated log: up to its last non-zero byte).
func largest(dir, suffix string) (string, int64) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
	sizes := map[string]int64{}
	for _, p := range paths {
		sizes[p] = dataLen(p)
	}
	sort.Slice(paths, func(i, j int) bool { return sizes[paths[i]] > sizes[paths[j]] })
	if len(paths) == 0 || sizes[paths[0]] == 0 {
		return "", 0
	}
	return paths[0], sizes[paths[0]]
}

// dataLen is the offset after a file's last non-zero byte.
func dataLen(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return int64(end)
}

func writeAt(path string, off int64, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(b, off)
	return err
}

func freeze(dir string) error {
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chattr +i: %v %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func thaw(dir string) error {
	if out, err := exec.Command("chattr", "-i", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chattr -i %s: %v %s", dir, err, bytes.TrimSpace(out))
	}
	return nil
}

func fileLen(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom is a file's content from off on.
func readFrom(path string, off int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}
