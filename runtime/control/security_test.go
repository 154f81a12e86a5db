package control_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/engenho/engenho/runtime/control"
)

const nobody = 65534

// TestSEC1SocketIsOwnerOnly: without a group the socket is 0600, owned by
// the daemon's uid, and the directory is left as it was.
func TestSEC1SocketIsOwnerOnly(t *testing.T) {
	s := serve(t, newFake(), nil)
	fi, err := os.Lstat(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want socket 0600", fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Getuid()) {
		t.Errorf("socket owner = %d, want %d", st.Uid, os.Getuid())
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(s.path), ".c*.tmp"))
	if len(leftovers) != 0 {
		t.Errorf("temporary socket names left behind: %v", leftovers)
	}
}

// TestSEC1GroupSocket: with a group the socket is 0660 owned by it, and the
// directory becomes group-searchable (0710) so members can reach it.
func TestSEC1GroupSocket(t *testing.T) {
	g := existingGroup(t)
	s := serve(t, newFake(), func(o *control.Options) { o.Group = g.Name })
	fi, err := os.Lstat(s.path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o660 || strconv.Itoa(int(st.Gid)) != g.Gid {
		t.Errorf("socket mode %v gid %d, want 0660 gid %s", fi.Mode().Perm(), st.Gid, g.Gid)
	}
	di, err := os.Stat(filepath.Dir(s.path))
	if err != nil {
		t.Fatal(err)
	}
	dst := di.Sys().(*syscall.Stat_t)
	if di.Mode().Perm() != 0o710 || strconv.Itoa(int(dst.Gid)) != g.Gid {
		t.Errorf("directory mode %v gid %d, want 0710 gid %s", di.Mode().Perm(), dst.Gid, g.Gid)
	}
}

// TestSEC1UnknownGroupIsAnError: a group that does not exist is a startup
// error, not a socket open to nobody or everybody.
func TestSEC1UnknownGroupIsAnError(t *testing.T) {
	dir := shortDir(t)
	_, err := control.NewServer(control.Options{Path: filepath.Join(dir, "s"), Group: "no-such-group-engenho", Handler: newFake()})
	if err == nil || !strings.Contains(err.Error(), "no-such-group-engenho") {
		t.Fatalf("unknown group: %v", err)
	}
}

// TestSEC1DirectoryChecks: the socket's directory must not be writable by
// group or others (they could replace the socket), must exist, and must be
// a directory; an existing non-socket file is never removed; a path too
// long for a unix socket is refused.
func TestSEC1DirectoryChecks(t *testing.T) {
	open := shortDir(t)
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := control.NewServer(control.Options{Path: filepath.Join(open, "s"), Handler: newFake()}); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("world-writable directory: %v", err)
	}
	if _, err := control.NewServer(control.Options{Path: filepath.Join(open, "missing", "s"), Handler: newFake()}); err == nil {
		t.Errorf("missing directory accepted")
	}
	dir := shortDir(t)
	regular := filepath.Join(dir, "s")
	if err := os.WriteFile(regular, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := control.NewServer(control.Options{Path: regular, Handler: newFake()}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("regular file at the socket path: %v", err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "precious" {
		t.Errorf("the regular file was touched")
	}
	long := filepath.Join(dir, strings.Repeat("x", 120))
	if _, err := control.NewServer(control.Options{Path: long, Handler: newFake()}); err == nil || !strings.Contains(err.Error(), "unix sockets allow 107") {
		t.Errorf("long path: %v", err)
	}
}

// TestDMN11StaleSocketIsReplacedLiveOneIsNot: a socket left by a dead
// daemon is replaced; one a live daemon answers on is an error.
func TestDMN11StaleSocketIsReplacedLiveOneIsNot(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "engenho.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // a stale socket file stays
	if _, err := control.Dial(path); !errors.Is(err, control.ErrNoDaemon) || !strings.Contains(err.Error(), "nothing listens on") {
		t.Errorf("dial to a stale socket: %v", err)
	}
	s := serve(t, newFake(), func(o *control.Options) { o.Path = path })
	if _, err := control.NewServer(control.Options{Path: path, Handler: newFake()}); err == nil || !strings.Contains(err.Error(), "another daemon is listening") {
		t.Errorf("second server on a live socket: %v", err)
	}
	c := dial(t, s.path)
	if _, err := c.Tree(ctx(t)); err != nil {
		t.Errorf("the live server was disturbed: %v", err)
	}
}

// TestDMN11DialErrorsSayWhatToDo: no socket file is "is the daemon
// running?".
func TestDMN11DialErrorsSayWhatToDo(t *testing.T) {
	path := filepath.Join(shortDir(t), "engenho.sock")
	_, err := control.Dial(path)
	if !errors.Is(err, control.ErrNoDaemon) || err.Error() != "is the daemon running? no socket at "+path+" (set --socket or --data-dir)" {
		t.Errorf("dial to nothing: %v", err)
	}
}

// TestSEC1PeerCredentialsRefuseOtherUsers runs a real client as uid 65534.
// The socket is loosened to 0666 by the test so the filesystem lets it
// connect: SO_PEERCRED is the check that must refuse it, and the refusal is
// logged with its uid, gid and pid.
func TestSEC1PeerCredentialsRefuseOtherUsers(t *testing.T) {
	needRoot(t)
	s := serve(t, newFake(), nil)
	openForOthers(t, s.path)
	out, pid := runAs(t, s.path, nobody, nobody)
	var resp control.Response
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("child said %q", out)
	}
	if resp.Error == nil || resp.Error.Code != control.CodeRefused || !strings.Contains(resp.Error.Message, "uid 65534 is not allowed") {
		t.Fatalf("other user: %+v", resp)
	}
	logs := s.log.String()
	for _, want := range []string{`"uid":65534`, `"gid":65534`, `"pid":` + strconv.Itoa(pid), "connection refused: peer not allowed"} {
		if !strings.Contains(logs, want) {
			t.Errorf("refusal log lacks %s:\n%s", want, logs)
		}
	}
}

// TestSEC1GroupMembersAreAllowed: with a group configured, a client whose
// gid is the group is served (the socket stays 0660: the filesystem and
// SO_PEERCRED agree), and one outside it is refused.
func TestSEC1GroupMembersAreAllowed(t *testing.T) {
	needRoot(t)
	g := existingGroup(t)
	gid, _ := strconv.Atoi(g.Gid)
	s := serve(t, newFake(), func(o *control.Options) { o.Group = g.Gid })
	out, _ := runAs(t, s.path, nobody, uint32(gid))
	var resp control.Response
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Error != nil || resp.ID != 1 {
		t.Fatalf("group member: %q", out)
	}
	openForOthers(t, s.path)
	out, _ = runAs(t, s.path, nobody, nobody)
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Error == nil || resp.Error.Code != control.CodeRefused {
		t.Fatalf("non-member: %q", out)
	}
}

// TestSEC1SocketModeStopsOthersFirst: with the socket left at 0600, another
// user cannot even connect (the filesystem refuses before the daemon is
// asked), and the client says so.
func TestSEC1SocketModeStopsOthersFirst(t *testing.T) {
	needRoot(t)
	s := serve(t, newFake(), nil)
	os.Chmod(filepath.Dir(s.path), 0o755)
	out, _ := runAs(t, s.path, nobody, nobody)
	if !strings.Contains(out, "permission denied") {
		t.Fatalf("other user on a 0600 socket: %q", out)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another uid (skipped: not a pass)")
	}
}

// existingGroup is a group other than root's that exists on this machine.
func existingGroup(t *testing.T) *user.Group {
	t.Helper()
	for _, name := range []string{"users", "nogroup", "daemon"} {
		if g, err := user.LookupGroup(name); err == nil && g.Gid != "0" {
			return g
		}
	}
	t.Fatal("no usable group on this machine (users, nogroup, daemon)")
	return nil
}

// openForOthers makes the socket and its directory reachable by anyone at
// the filesystem level.
func openForOthers(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
}

// runAs runs this test binary as uid/gid in client mode against path and
// returns what it printed and its pid. The binary is linked (or copied)
// into a directory the other user can read.
func runAs(t *testing.T, path string, uid, gid uint32) (string, int) {
	t.Helper()
	bin := childBinary(t)
	cmd := exec.Command(bin, "-test.run=^$")
	// No 1s race-detector pause at exit.
	cmd.Env = []string{childEnv + "=" + path, "GORACE=atexit_sleep_ms=0"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(stdout)
	cmd.Wait()
	return strings.TrimSpace(string(out)), cmd.Process.Pid
}

var childBin string

func childBinary(t *testing.T) string {
	t.Helper()
	if childBin != "" {
		return childBin
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ctlbin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir); childBin = "" })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "control.test")
	if os.Link(self, bin) == nil {
		childBin = bin
		return bin
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	childBin = bin
	return bin
}
