package process_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/process"
)

const waitLimit = 20 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, d drivers.Driver, spec drivers.Spec) {
	t.Helper()
	if err := d.Create(ctxT(t), spec); err != nil {
		t.Fatalf("Create %s: %v", spec.Name, err)
	}
}

func mustStart(t *testing.T, d drivers.Driver, name string) drivers.Status {
	t.Helper()
	if err := d.Start(ctxT(t), name); err != nil {
		t.Fatalf("Start %s: %v", name, err)
	}
	st, err := d.Inspect(ctxT(t), name)
	if err != nil {
		t.Fatalf("Inspect %s: %v", name, err)
	}
	return st
}

// waitFor polls cond every 5ms until it holds, failing after waitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitForOr is waitFor that, when it gives up, says what it saw.
func waitForOr(t *testing.T, what string, cond func() bool, saw func() string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s: %s", what, saw())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readLogs(t *testing.T, d drivers.Driver, name string) string {
	t.Helper()
	rc, err := d.Logs(ctxT(t), name, drivers.LogOptions{})
	if err != nil {
		t.Fatalf("Logs %s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Logs %s: %v", name, err)
	}
	return string(b)
}

func waitLogs(t *testing.T, d drivers.Driver, name, want string) string {
	t.Helper()
	var out string
	waitFor(t, fmt.Sprintf("%s logs to contain %q", name, want), func() bool {
		out = readLogs(t, d, name)
		return strings.Contains(out, want)
	})
	return out
}

// watchExit arms a watch and returns a channel that receives its exit.
func watchExit(t *testing.T, d drivers.Driver, name string) <-chan drivers.Exit {
	t.Helper()
	ch := make(chan drivers.Exit, 1)
	stop, err := d.Watch(name, func(e drivers.Exit) { ch <- e })
	if err != nil {
		t.Fatalf("Watch %s: %v", name, err)
	}
	t.Cleanup(stop)
	return ch
}

func recvExit(t *testing.T, ch <-chan drivers.Exit, what string) drivers.Exit {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(waitLimit):
		t.Fatalf("gave up waiting for the exit of %s", what)
		return drivers.Exit{}
	}
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}

// DRV-3: Stop ends a well-behaved workload with SIGTERM, and one that
// ignores SIGTERM with SIGKILL once the grace has passed.
func TestStopTermThenKill(t *testing.T) {
	d := newDriver(t, t.TempDir())
	defer d.Close()
	mustCreate(t, d, shSpec("polite", "sleep 3600", nil))
	mustCreate(t, d, shSpec("stubborn", "trap '' TERM; echo ready; sleep 3600", nil))
	mustStart(t, d, "polite")
	mustStart(t, d, "stubborn")
	waitLogs(t, d, "stubborn", "ready")

	polite := watchExit(t, d, "polite")
	if err := d.Stop(ctxT(t), "polite", 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if e := recvExit(t, polite, "polite"); e.Signal != "terminated" || e.ExitCode != -1 {
		t.Errorf("polite exit %+v, want signal terminated, code -1", e)
	}

	stubborn := watchExit(t, d, "stubborn")
	if err := d.Stop(ctxT(t), "stubborn", 100*time.Millisecond); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if e := recvExit(t, stubborn, "stubborn"); e.Signal != "killed" {
		t.Errorf("stubborn exit %+v, want signal killed", e)
	}
	if st, _ := d.Inspect(ctxT(t), "stubborn"); st.State != drivers.StateStopped || st.ExitCode != -1 {
		t.Errorf("after Stop: %+v, want stopped with code -1", st)
	}
}

// DRV-3: the workload runs in its own process group: Stop reaches its
// children, and when the main process exits the rest of its group is
// killed.
func TestProcessGroup(t *testing.T) {
	d := newDriver(t, t.TempDir())
	defer d.Close()
	mustCreate(t, d, shSpec("tree", "sleep 3600 & echo child $!; sleep 3600", nil))
	st := mustStart(t, d, "tree")
	child := childPid(t, waitLogs(t, d, "tree", "child "))
	if pgid, err := unix.Getpgid(st.Pid); err != nil || pgid != st.Pid {
		t.Errorf("workload pgid %d (%v), want its own pid %d", pgid, err, st.Pid)
	}
	if err := d.Stop(ctxT(t), "tree", 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	waitFor(t, "the workload's child to die with the group", func() bool { return !alive(child) })

	mustCreate(t, d, shSpec("leaver", "sleep 3600 & echo child $!; exit 0", nil))
	mustStart(t, d, "leaver")
	child = childPid(t, waitLogs(t, d, "leaver", "child "))
	waitFor(t, "a straggler to be killed when the main process exits", func() bool { return !alive(child) })
}

func childPid(t *testing.T, logs string) int {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(line, "child "); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				t.Fatalf("bad child line %q", line)
			}
			return pid
		}
	}
	t.Fatalf("no child pid in %q", logs)
	return 0
}

// DRV-3: env, working directory, ports; the daemon's own environment is
// not passed on.
func TestEnvDirAndPorts(t *testing.T) {
	t.Setenv("ENGENHO_TEST_DAEMON_SECRET", "hunter2")
	d := newDriver(t, t.TempDir())
	defer d.Close()
	work := t.TempDir()
	spec := shSpec("envy", "echo foo=$FOO; pwd; echo port=$PORT p80=$PORT_80 p443=$PORT_443; env; sleep 3600", nil)
	spec.Env = map[string]string{"FOO": "bar baz"}
	spec.WorkingDir = work
	spec.Ports = []drivers.Port{{Target: 80, HostPort: 18080}, {Target: 443, HostPort: 0}}
	mustCreate(t, d, spec)
	st := mustStart(t, d, "envy")
	out := waitLogs(t, d, "envy", "port=")
	if !strings.Contains(out, "foo=bar baz\n") || !strings.Contains(out, work+"\n") {
		t.Errorf("env/pwd not applied:\n%s", out)
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("the daemon's environment leaked into the workload:\n%s", out)
	}
	if st.Addresses[80] != "127.0.0.1:18080" {
		t.Errorf("address of 80: %q", st.Addresses[80])
	}
	hp443 := strings.TrimPrefix(st.Addresses[443], "127.0.0.1:")
	if n, err := strconv.Atoi(hp443); err != nil || n <= 0 {
		t.Fatalf("address of 443 %q: want a picked host port", st.Addresses[443])
	}
	if want := "port=18080 p80=18080 p443=" + hp443 + "\n"; !strings.Contains(out, want) {
		t.Errorf("port env: want %q in\n%s", want, out)
	}
}

// DRV-3: the workload runs as the spec's user (uid, uid:gid or a name).
func TestUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP switching users needs root")
	}
	d := newDriver(t, t.TempDir())
	defer d.Close()
	for i, c := range []struct{ user, want string }{
		{"65534", "65534:65534"},
		{"65534:100", "65534:100"},
		{"nobody", "65534:65534"},
		{"4242", "4242:4242"},
	} {
		name := fmt.Sprintf("user%d", i)
		spec := shSpec(name, `echo id=$(id -u):$(id -g); sleep 3600`, nil)
		spec.User = c.user
		mustCreate(t, d, spec)
		mustStart(t, d, name)
		if out := waitLogs(t, d, name, "id="); !strings.Contains(out, "id="+c.want+"\n") {
			t.Errorf("user %q: got %q, want id=%s", c.user, out, c.want)
		}
		res, err := d.Exec(ctxT(t), name, []string{"id", "-u"})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != strings.Split(c.want, ":")[0] {
			t.Errorf("Exec as %q: %+v %v", c.user, res, err)
		}
		d.Kill(ctxT(t), name)
	}
}

// DRV-3, SVC-2: Validate and Create refuse what cannot run here.
func TestValidateRefuses(t *testing.T) {
	d := newDriver(t, t.TempDir())
	defer d.Close()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "data.txt")
	os.WriteFile(notExec, []byte("x"), 0o644)
	script := filepath.Join(dir, "run.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755)

	bad := map[string]drivers.Spec{
		"no command":       {Name: "v1"},
		"not on PATH":      {Name: "v2", Command: []string{"no-such-program-engenho"}},
		"missing path":     {Name: "v3", Command: []string{"/no/such/bin"}},
		"not executable":   {Name: "v4", Command: []string{notExec}},
		"missing work dir": {Name: "v5", Command: []string{"true"}, WorkingDir: "/no/such/dir"},
		"unknown user":     {Name: "v6", Command: []string{"true"}, User: "no-such-user-engenho"},
		"bad port":         {Name: "v7", Command: []string{"true"}, Ports: []drivers.Port{{Target: 0}}},
		"udp port":         {Name: "v8", Command: []string{"true"}, Ports: []drivers.Port{{Target: 53, Protocol: "udp"}}},
		"PATH from spec":   {Name: "v9", Command: []string{"sh"}, Env: map[string]string{"PATH": dir}},
	}
	for what, spec := range bad {
		if err := d.Validate(ctxT(t), spec); !errors.Is(err, drivers.ErrInvalid) {
			t.Errorf("Validate %s: %v, want ErrInvalid", what, err)
		}
		if err := d.Create(ctxT(t), spec); !errors.Is(err, drivers.ErrInvalid) {
			t.Errorf("Create %s: %v, want ErrInvalid", what, err)
		}
	}
	good := map[string]drivers.Spec{
		"on PATH":       {Name: "g1", Command: []string{"true"}},
		"absolute":      {Name: "g2", Command: []string{script}},
		"relative":      {Name: "g3", Command: []string{"./run.sh"}, WorkingDir: dir},
		"PATH in spec":  {Name: "g4", Command: []string{"run.sh"}, Env: map[string]string{"PATH": dir}},
		"numeric user":  {Name: "g5", Command: []string{"true"}, User: strconv.Itoa(os.Geteuid())},
		"port and host": {Name: "g6", Command: []string{"true"}, Ports: []drivers.Port{{Target: 80, HostPort: 8080, Protocol: "tcp"}}},
	}
	for what, spec := range good {
		if err := d.Validate(ctxT(t), spec); err != nil {
			t.Errorf("Validate %s: %v", what, err)
		}
	}
	// A binary that disappears after Create makes Start fail ErrInvalid.
	gone := filepath.Join(dir, "gone.sh")
	os.WriteFile(gone, []byte("#!/bin/sh\nsleep 3600\n"), 0o755)
	mustCreate(t, d, drivers.Spec{Name: "gone", Command: []string{gone}})
	os.Remove(gone)
	if err := d.Start(ctxT(t), "gone"); !errors.Is(err, drivers.ErrInvalid) {
		t.Errorf("Start with the binary gone: %v, want ErrInvalid", err)
	}
	if st, _ := d.Inspect(ctxT(t), "gone"); st.State != drivers.StateStopped {
		t.Errorf("failed Start left state %q", st.State)
	}
}

// DRV-1: an Exec probe that outlives its ctx is killed, with its children,
// and reported as transient.
func TestExecTimeout(t *testing.T) {
	d := newDriver(t, t.TempDir())
	defer d.Close()
	mustCreate(t, d, shSpec("probed", "sleep 3600", nil))
	mustStart(t, d, "probed")
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		defer cancel()
		// The redirection creates the file before echo fills it.
		for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if b, _ := os.ReadFile(pidFile); strings.HasSuffix(string(b), "\n") {
				return
			}
		}
	}()
	_, err := d.Exec(ctx, "probed", []string{"sh", "-c", "sleep 3600 & echo $! > " + pidFile + "; wait"})
	if !errors.Is(err, drivers.ErrTransient) {
		t.Fatalf("Exec past its ctx: %v, want ErrTransient", err)
	}
	b, _ := os.ReadFile(pidFile)
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	waitFor(t, "the probe's child to be killed", func() bool { return !alive(child) })
}

// Two Drivers on different dirs in one process each see their own exits.
// Each has a cgroup root of its own, as two daemons on one node must
// (drivers.process.cgroup_root): under one root, the two instances named
// "same" would share a cgroup, and b's start is refused while a's runs.
func TestTwoDriversOneProcess(t *testing.T) {
	a, b := newDriverIn(t, t.TempDir(), cgroupRoot+"-a"), newDriverIn(t, t.TempDir(), cgroupRoot+"-b")
	defer a.Close()
	defer b.Close()
	for i, d := range []*process.Driver{a, b} {
		mustCreate(t, d, shSpec("same", fmt.Sprintf("exit %d", 10+i), nil))
	}
	for _, d := range []*process.Driver{a, b} {
		mustStart(t, d, "same")
	}
	waitFor(t, "both to exit", func() bool {
		sa, _ := a.Inspect(ctxT(t), "same")
		sb, _ := b.Inspect(ctxT(t), "same")
		return sa.State == drivers.StateStopped && sb.State == drivers.StateStopped
	})
	sa, _ := a.Inspect(ctxT(t), "same")
	sb, _ := b.Inspect(ctxT(t), "same")
	if sa.ExitCode != 10 || sb.ExitCode != 11 {
		t.Errorf("exit codes %d %d, want 10 11", sa.ExitCode, sb.ExitCode)
	}
}

// A Dir is used by one Driver at a time.
func TestDirLocked(t *testing.T) {
	dir := t.TempDir()
	a := newDriver(t, dir)
	if _, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot}); err == nil {
		t.Fatalf("second New on %s succeeded", dir)
	}
	a.Close()
	b := newDriver(t, dir)
	b.Close()
}

// DRV-4: a run whose state cannot be written is not left running (a
// restarted daemon could not adopt it and would start a second one).
func TestStartFailsWhenTheRunCannotBeRecorded(t *testing.T) {
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	mustCreate(t, d, shSpec("unrecorded", "sleep 3600", nil))
	// A directory where the temp state file goes makes the write fail.
	if err := os.Mkdir(filepath.Join(dir, "instances", "unrecorded", "state.json.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctxT(t), "unrecorded"); !errors.Is(err, drivers.ErrTransient) {
		t.Fatalf("Start: %v, want ErrTransient", err)
	}
	if st, _ := d.Inspect(ctxT(t), "unrecorded"); st.State != drivers.StateStopped {
		t.Errorf("after the failed Start: state %q, want stopped", st.State)
	}
}

// Issue 15: an image on the process driver is refused with one line that
// says which driver runs images; the process driver never runs the
// command on the host in the image's place.
func TestImageRefusedOnTheProcessDriver(t *testing.T) {
	d := newDriver(t, t.TempDir())
	defer d.Close()
	spec := shSpec("img", "true", nil)
	spec.Image = "postgres:16"
	err := d.Validate(ctxT(t), spec)
	if !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), "image postgres:16") || !strings.Contains(err.Error(), "driver: incus") {
		t.Fatalf("Validate: %v", err)
	}
	if err := d.Create(ctxT(t), spec); !errors.Is(err, drivers.ErrInvalid) {
		t.Fatalf("Create: %v", err)
	}
}
