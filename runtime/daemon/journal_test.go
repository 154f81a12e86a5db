package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// idleStack is a stack of two long-running processes; with big, its
// rendered definition is larger than badger's value threshold (32 KiB),
// so the journal keeps it in the value log.
func idleStack(name string, big bool) string {
	env := ""
	if big {
		env = fmt.Sprintf("    env: {PADDING: %q}\n", strings.Repeat("p", 40<<10))
	}
	return fmt.Sprintf(`name: %s
services:
  a:
    command: ["/bin/sh", "-c", "exec sleep 100000"]
%s    stop_grace_period: 1s
  b:
    command: ["/bin/sh", "-c", "exec sleep 100000"]
    stop_grace_period: 1s
`, name, env)
}

// journalFile is the one file of the node's journal with suffix (the
// largest when there are several).
func journalFile(t *testing.T, n *node, suffix string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(n.data(), "journal", "*"+suffix))
	sort.Slice(paths, func(i, j int) bool { return fileSize(t, paths[i]) > fileSize(t, paths[j]) })
	if len(paths) == 0 || fileSize(t, paths[0]) == 0 {
		t.Fatalf("no *%s with data in %s", suffix, filepath.Join(n.data(), "journal"))
	}
	return paths[0]
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func garbage(n int) []byte { return []byte(strings.Repeat("GARBAGE!", n/8+1)[:n]) }

// chattr sets an attribute and clears it at cleanup (root passes every
// permission check: an immutable directory is what it cannot write).
func chattr(t *testing.T, attr, path string) {
	t.Helper()
	if out, err := exec.Command("chattr", attr, path).CombinedOutput(); err != nil {
		t.Skipf("chattr %s %s: %v %s (needs root and chattr)", attr, path, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
}

// journalDamage is one kind of damage done to a stopped node's journal.
type journalDamage struct {
	// name is short: it is in the test's directory, and a unix socket's
	// path is at most 107 bytes.
	name string
	// killed: the daemon is SIGKILLed, so its last records are in the
	// write-ahead log; otherwise it exits cleanly and badger writes a table.
	killed bool
	// damage returns the file the daemon must name.
	damage func(t *testing.T, n *node) string
	// unwritable: recovered by making it writable and `retry`, not reinit.
	unwritable bool
}

func journalDamages() []journalDamage {
	return []journalDamage{
		{name: "sst-bytes", damage: func(t *testing.T, n *node) string {
			p := journalFile(t, n, ".sst")
			writeAt(t, p, fileSize(t, p)/3, garbage(64))
			return p
		}},
		{name: "sst-footer", damage: func(t *testing.T, n *node) string {
			p := journalFile(t, n, ".sst")
			writeAt(t, p, fileSize(t, p)-64, make([]byte, 64))
			return p
		}},
		{name: "sst-empty", damage: func(t *testing.T, n *node) string {
			p := journalFile(t, n, ".sst")
			must(t, os.Truncate(p, 0))
			return p
		}},
		{name: "sst-cut", damage: func(t *testing.T, n *node) string {
			p := journalFile(t, n, ".sst")
			must(t, os.Truncate(p, fileSize(t, p)/2))
			return p
		}},
		{name: "manifest-cut", damage: func(t *testing.T, n *node) string {
			p := filepath.Join(n.data(), "journal", "MANIFEST")
			must(t, os.Truncate(p, 10))
			return p
		}},
		{name: "manifest-junk", damage: func(t *testing.T, n *node) string {
			p := filepath.Join(n.data(), "journal", "MANIFEST")
			must(t, os.WriteFile(p, garbage(int(fileSize(t, p))), 0o600))
			return p
		}},
		{name: "vlog", damage: func(t *testing.T, n *node) string {
			p := journalFile(t, n, ".vlog")
			writeAt(t, p, 20+2, garbage(16)) // the first entry's header and key
			return p
		}},
		{name: "wal", killed: true, damage: func(t *testing.T, n *node) string {
			p := journalFile(t, n, ".mem")
			writeAt(t, p, 20+2, garbage(16)) // the first entry: every record after it would be dropped
			return p
		}},
		{name: "sst-missing", damage: func(t *testing.T, n *node) string {
			p := journalFile(t, n, ".sst")
			must(t, os.Remove(p))
			return p
		}},
		{name: "file", damage: func(t *testing.T, n *node) string {
			p := filepath.Join(n.data(), "journal")
			must(t, os.RemoveAll(p))
			must(t, os.WriteFile(p, []byte("not a journal\n"), 0o600))
			return p
		}},
		{name: "readonly", unwritable: true, damage: func(t *testing.T, n *node) string {
			p := filepath.Join(n.data(), "journal")
			chattr(t, "+i", p)
			return p
		}},
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// REL-5, DMN-7, DMN-14, DMN-5, DMN-9: every kind of damage to the journal
// of a real daemon, with real badger files. The daemon never crashes: it
// holds in failed/hold with class corrupt, its status, events and why name
// the damaged file and the command that recovers; the boot failure is in
// the events although the journal is unusable. After `engenho reinit
// journal` (or, for a journal it cannot write, making it writable and
// `engenho retry`), it runs again with the same node identity and adopts
// the workloads that kept running: the same pids, no restart.
func TestREL5Damage(t *testing.T) {
	for _, tc := range journalDamages() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testDamage(t, tc)
		})
	}
}

func testDamage(t *testing.T, tc journalDamage) {
	n := newNode(t)
	n.writeConfig(n.writeFile("listed.yaml", idleStack("listed", true)))
	n.start("running")
	n.eventually("listed converged", 60*time.Second, func() bool {
		return converged(n.service("listed", "a")) && converged(n.service("listed", "b"))
	})
	st, _ := n.status()
	identity := st.Daemon.Node
	pids := map[string]int{}
	for _, svc := range []string{"a", "b"} {
		for _, r := range n.service("listed", svc).Replicas {
			pids[r.Instance] = pidOf(t, n, r.Instance)
		}
	}
	if tc.killed {
		n.kill()
	} else if code := n.stop(); code != 0 {
		t.Fatalf("daemon exited with %d", code)
	}
	if _, err := os.Stat(n.socket()); !tc.killed && err == nil {
		t.Errorf("the socket %s was left behind by a clean exit", n.socket())
	}
	file := tc.damage(t, n)

	n.start("failed")
	held := checkHeld(t, n, file, tc.unwritable)
	if held.Node.ID != identity.ID {
		t.Errorf("held: node %+v, was %+v", held.Node, identity)
	}

	if tc.unwritable {
		must(t, exec.Command("chattr", "-i", file).Run())
		n.mustCLI("retry")
	} else {
		out := n.mustCLI("reinit", "journal", "--yes")
		for _, want := range []string{"moved aside", "kept the node identity", "the daemon boots again now"} {
			if !strings.Contains(out, want) {
				t.Errorf("reinit output lacks %q:\n%s", want, out)
			}
		}
	}
	n.waitState("running")
	n.eventually("listed converged after recovery", 60*time.Second, func() bool {
		return converged(n.service("listed", "a")) && converged(n.service("listed", "b"))
	})
	st, _ = n.status()
	if st.Daemon.Node.ID != identity.ID || st.Daemon.Node.Name != identity.Name {
		t.Errorf("node identity %+v after recovery, was %+v", st.Daemon.Node, identity)
	}
	for _, svc := range []string{"a", "b"} {
		for _, r := range n.service("listed", svc).Replicas {
			if want, ok := pids[r.Instance]; !ok || pidOf(t, n, r.Instance) != want || r.Restarts != 0 {
				t.Errorf("%s: pid %d (was %d), %d restarts: the workload was restarted", r.Instance, pidOf(t, n, r.Instance), want, r.Restarts)
			}
		}
	}
	if code := n.stop(); code != 0 { // and its output is all read
		t.Errorf("the daemon exited with %d", code)
	}
	if out := n.log.String(); strings.Contains(out, "goroutine ") || strings.Contains(out, "panic:") {
		t.Errorf("the daemon's log holds a Go trace:\n%s", tail(out, 40))
	}
}

// checkHeld checks what a daemon held on a damaged journal says.
func checkHeld(t *testing.T, n *node, file string, unwritable bool) control.DaemonStatus {
	t.Helper()
	st, err := n.status()
	must(t, err)
	lc := st.Daemon.Lifecycle
	cmd := "engenho reinit journal"
	if unwritable {
		cmd = "engenho retry"
	}
	if lc.Name != lifecycle.Failed || lc.Retry != lifecycle.RetryHold || lc.LastError == nil || lc.LastError.Class != lifecycle.CauseCorrupt {
		t.Fatalf("held: lifecycle %s, last error %+v", lc, lc.LastError)
	}
	reason := lc.LastError.Error()
	if !strings.Contains(reason, file) || !strings.Contains(reason, cmd) {
		t.Errorf("the failure does not name %s and `%s`: %s", file, cmd, reason)
	}
	if out := n.mustCLI("status"); !strings.Contains(out, "failed/hold") || !strings.Contains(out, cmd) {
		t.Errorf("status:\n%s", out)
	}
	if out, code := n.cli("why", "listed/a"); code != 1 || !strings.Contains(out, file) || !strings.Contains(out, cmd) {
		t.Errorf("why: exit %d:\n%s", code, out)
	}
	evs := memEvents(t, n)
	found := false
	for _, ev := range evs {
		if ev.Kind == messages.KindJournalDamaged && strings.Contains(ev.Message, file) && strings.Contains(ev.Message, cmd) {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s event naming %s among %+v", messages.KindJournalDamaged, file, evs)
	}
	return st.Daemon
}

// memEvents reads the events of a daemon whose journal is closed.
func memEvents(t *testing.T, n *node) []messages.Event {
	t.Helper()
	c, err := n.client()
	must(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var evs []messages.Event
	res, err := c.Events(ctx, control.EventsArgs{}, func(ev messages.Event) error { evs = append(evs, ev); return nil })
	must(t, err)
	if !res.Memory {
		t.Errorf("events of a closed journal: %+v, want memory", res)
	}
	return evs
}

// DMN-14, DMN-2, REL-5: `engenho reinit journal` works with the daemon
// down. It takes the data directory's lock, so with a daemon holding it
// (its socket not answering) it refuses, naming the pid. It moves the
// journal to the attic, keeps the node identity and salvages the intents of
// a sound journal (a stack applied over the socket, a stopped service), so
// the next boot adopts the running workloads without a restart.
func TestDMN14ReinitJournalOffline(t *testing.T) {
	n := newNode(t)
	n.start("running")
	n.mustCLI("apply", n.writeFile("s.yaml", idleStack("sock", false)))
	n.eventually("sock converged", 60*time.Second, func() bool { return converged(n.service("sock", "a")) })
	n.mustCLI("service", "stop", "sock/b")
	n.eventually("sock/b stopped", 30*time.Second, func() bool { return n.service("sock", "b").Stopped })
	st, _ := n.status()
	inst := n.service("sock", "a").Replicas[0].Instance
	pid := pidOf(t, n, inst)

	out, code := n.cli("--socket", filepath.Join(n.dir, "nowhere.sock"), "reinit", "journal", "--yes")
	if code != 1 || !strings.Contains(out, itoa(n.cmd.Process.Pid)) {
		t.Fatalf("offline reinit beside a running daemon: exit %d:\n%s", code, out)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out = n.mustCLI("reinit", "journal", "--yes")
	if !strings.Contains(out, "no daemon answers") || !strings.Contains(out, "salvaged") || !strings.Contains(out, "1 stopped") {
		t.Errorf("offline reinit:\n%s", out)
	}
	moved, _ := filepath.Glob(filepath.Join(n.data(), "attic", "*", "journal", "MANIFEST"))
	if len(moved) != 1 {
		t.Errorf("the old journal is not in the attic: %v", moved)
	}

	n.start("running")
	n.eventually("sock adopted", 60*time.Second, func() bool { return converged(n.service("sock", "a")) })
	after, _ := n.status()
	if after.Daemon.Node != st.Daemon.Node {
		t.Errorf("node %+v after reinit, was %+v", after.Daemon.Node, st.Daemon.Node)
	}
	if got := n.service("sock", "a").Replicas; len(got) != 1 || got[0].Instance != inst || pidOf(t, n, inst) != pid {
		t.Errorf("sock/a after reinit: %+v (was %s pid %d)", got, inst, pid)
	}
	if !n.service("sock", "b").Stopped {
		t.Errorf("the stopped intent was not salvaged")
	}
}

// REL-5: a daemon held on a damaged journal, retried 30 times, keeps the
// same number of descriptors: every failed open happens in a child
// process, never in the daemon (an in-process badger.Open that fails
// leaks two descriptors and a memtable each time).
func TestREL5HeldRetriesLeakNoDescriptor(t *testing.T) {
	n := newNode(t)
	n.start("running")
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	p := filepath.Join(n.data(), "journal", "MANIFEST")
	must(t, os.WriteFile(p, garbage(int(fileSize(t, p))), 0o600))
	n.start("failed")
	c, err := n.client()
	must(t, err)
	defer c.Close()
	retryHeld(t, c, 0) // the connection is accepted and in use
	before := settledFDs(t, n.cmd.Process.Pid)
	for i := range 30 {
		retryHeld(t, c, i)
	}
	if after := settledFDs(t, n.cmd.Process.Pid); after != before {
		t.Fatalf("%d descriptors before 30 failed boots, %d after", before, after)
	}
}

// retryHeld retries a held boot and waits until it holds again.
func retryHeld(t testing.TB, c *control.Client, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Retry(ctx)
	if err != nil {
		t.Fatalf("retry %d: %v", i, err)
	}
	attempt := res.State.Attempt
	for {
		st, err := c.Status(ctx, control.StatusArgs{})
		if err != nil {
			t.Fatalf("status after retry %d: %v", i, err)
		}
		lc := st.Daemon.Lifecycle
		if lc.Name == lifecycle.Failed && lc.Attempt == attempt {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settledFDs is the fewest descriptors pid had over a few looks: the Go
// runtime may hold one for a moment (a child's pidfd being released).
func settledFDs(t testing.TB, pid int) int {
	least := procFDs(t, pid)
	for range 4 {
		time.Sleep(20 * time.Millisecond)
		least = min(least, procFDs(t, pid))
	}
	return least
}

func procFDs(t testing.TB, pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// DMN-5: the node identity is kept beside the journal
// (DATA/control/identity.json) from the first boot.
func TestDMN5IdentityKeptBesideJournal(t *testing.T) {
	n := newNode(t)
	n.start("running")
	st, _ := n.status()
	b, err := os.ReadFile(filepath.Join(n.data(), "control", "identity.json"))
	must(t, err)
	var id struct{ Name, ID string }
	must(t, json.Unmarshal(b, &id))
	if id.ID == "" || id.ID != st.Daemon.Node.ID || id.Name != st.Daemon.Node.Name {
		t.Fatalf("identity.json %s, status %+v", b, st.Daemon.Node)
	}
}
