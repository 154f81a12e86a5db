package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/ports"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// bin is the engenho binary built once for these tests: the integration
// tests run the real daemon as a separate process.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "engenho-bin-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "engenho")
	build := exec.Command("go", "build", "-o", bin, "github.com/engenho/engenho/cmd/engenho")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building engenho:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is one data directory with a config, and the daemon running on it.
type node struct {
	t      testing.TB
	dir    string
	config string
	cmd    *exec.Cmd
	log    *lockedBuffer
	// extra is appended to the config (more keys, e.g. drivers).
	extra string
	// inherit is passed to the daemon as descriptors 3, 4, ..., as a
	// login shell or a service manager leaves descriptors open.
	inherit []*os.File
	// launcher, when set, runs the daemon: the daemon's argv is appended
	// to it (a shell that sets variables and execs it, keeping its pid).
	launcher []string
	// flags are more `engenho daemon` flags.
	flags []string
	// portRange is this node's ports.instance_range (SVC-24).
	portRange ports.Range
	// cgroupRoot is this node's cgroup subtree (DRV-12), so nodes of
	// tests side by side never share one; cleanup removes it.
	cgroupRoot string
	// sweep is the config's sweep.interval; "" is 1s, for tests that
	// want failures found soon.
	sweep string
}

func (n *node) sweepInterval() string {
	if n.sweep == "" {
		return "1s"
	}
	return n.sweep
}

const baseConfig = `data_dir: data
log: {level: info}
sweep: {interval: %s}
stacks: [%s]
ports: {instance_range: %q}
`

// nodeRanges counts the nodes of this test binary: each gets its own block
// of host ports (SVC-24), so the instances of nodes side by side (and of
// test binaries side by side: the pid picks the first block) never race
// for the same port between the probe and the workload's bind.
var nodeRanges atomic.Int64

// nextRange is the next node's ports.instance_range: 40 ports in
// 30000-64999.
func nextRange() ports.Range {
	const size, blocks = 40, 35000 / 40
	b := (int64(os.Getpid()) + nodeRanges.Add(1)*7) % blocks
	lo := 30000 + int(b)*size
	return ports.Range{Low: lo, High: lo + size - 1}
}

func newNode(t testing.TB, stacks ...string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{t: t, dir: dir, config: filepath.Join(dir, "engenho.yaml"), cgroupRoot: drivertest.CgroupRoot("daemon"), portRange: nextRange()}
	n.writeConfig(stacks...)
	t.Cleanup(n.cleanup)
	return n
}

func (n *node) writeConfig(stacks ...string) {
	n.t.Helper()
	if err := os.WriteFile(n.config, []byte(fmt.Sprintf(baseConfig, n.sweepInterval(), strings.Join(stacks, ", "), n.portRange.String())+n.extra), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) writeFile(name, content string) string {
	n.t.Helper()
	p := filepath.Join(n.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
	return p
}

func (n *node) data() string   { return filepath.Join(n.dir, "data") }
func (n *node) socket() string { return filepath.Join(n.data(), "control", "engenho.sock") }

// start launches the daemon and waits until it answers with state want.
func (n *node) start(want string) {
	n.t.Helper()
	n.log = &lockedBuffer{}
	argv := append(append([]string{}, n.launcher...), bin, "daemon", "--config", n.config, "--log-format", "json")
	argv = append(argv, n.flags...)
	n.cmd = exec.Command(argv[0], argv[1:]...)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	n.cmd.ExtraFiles = n.inherit
	n.cmd.Env = append(os.Environ(), "ENGENHO_DRIVERS_PROCESS_CGROUP_ROOT="+n.cgroupRoot)
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.waitState(want)
}

func (n *node) waitState(want string) {
	n.t.Helper()
	n.eventually("daemon "+want, 60*time.Second, func() bool {
		st, err := n.status()
		return err == nil && string(st.Daemon.Lifecycle.Name) == want
	})
}

// kill SIGKILLs the daemon (its workloads live on).
func (n *node) kill() {
	n.t.Helper()
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	_ = n.cmd.Wait()
	n.cmd = nil
}

// stop sends SIGTERM and waits for the exit code.
func (n *node) stop() int {
	n.t.Helper()
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	err := n.cmd.Wait()
	n.cmd = nil
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return 0
}

// cleanup ends the daemon and every workload it left running.
func (n *node) cleanup() {
	if n.cmd != nil {
		n.kill()
	}
	states, _ := filepath.Glob(filepath.Join(n.data(), "instances", "*", "state.json"))
	for _, path := range states {
		var st struct {
			Pid int `json:"pid"`
		}
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &st) == nil && st.Pid > 0 {
			_ = syscall.Kill(-st.Pid, syscall.SIGKILL)
			_ = syscall.Kill(st.Pid, syscall.SIGKILL)
		}
	}
	if _, err := drivertest.CleanCgroups(n.cgroupRoot); err != nil {
		n.t.Errorf("removing the node's cgroups: %v", err)
	}
	if n.t.Failed() && n.log != nil {
		n.t.Logf("daemon log (tail):\n%s", tail(n.log.String(), 60))
	}
}

// lockedBuffer is the daemon's output, readable while the daemon writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

func (n *node) client() (*control.Client, error) { return control.Dial(n.socket()) }

func (n *node) status() (control.StatusResult, error) {
	c, err := n.client()
	if err != nil {
		return control.StatusResult{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Status(ctx, control.StatusArgs{})
}

func (n *node) service(stack, svc string) messages.ServiceStatus {
	st, err := n.status()
	if err != nil {
		return messages.ServiceStatus{}
	}
	for _, s := range st.Services {
		if s.Stack == stack && s.Service == svc {
			return s
		}
	}
	return messages.ServiceStatus{}
}

// cli runs an engenho client command against the node; it returns the
// combined output and the exit code.
func (n *node) cli(args ...string) (string, int) {
	n.t.Helper()
	cmd := exec.Command(bin, append([]string{"--data-dir", n.data()}, args...)...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		n.t.Fatal(err)
	}
	return string(out), 0
}

func (n *node) mustCLI(args ...string) string {
	n.t.Helper()
	out, code := n.cli(args...)
	if code != 0 {
		n.t.Fatalf("engenho %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// eventually polls cond; the limit only bounds a broken test.
func (n *node) eventually(what string, limit time.Duration, cond func() bool) {
	n.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			n.t.Fatalf("%s: not reached within %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func converged(s messages.ServiceStatus) bool {
	return s.State == messages.ServiceConverged && s.Healthy == s.Desired
}

// instances maps instance name to start time for a service's replicas.
func instances(s messages.ServiceStatus) map[string]time.Time {
	out := map[string]time.Time{}
	for _, r := range s.Replicas {
		out[r.Instance] = r.StartedAt
	}
	return out
}

// webStack is an HTTP service of the engenho demo workload.
func webStack(name, version string, replicas int, update string) string {
	return fmt.Sprintf(`name: %s
services:
  web:
    command: ["${ENGENHO_BIN}", "demo-http"]
    env: {VERSION: %q}
    ports: ["80"]
    healthcheck:
      http: {path: /healthz, port: 80}
      interval: 1s
      start_interval: 200ms
      retries: 2
    deploy:
      replicas: %d
%s
    stop_grace_period: 2s
  idle:
    command: ["/bin/sh", "-c", "exec sleep 100000"]
    stop_grace_period: 1s
`, name, version, replicas, update)
}

// pidOf reads a process instance's pid from the process driver's state.
func pidOf(t testing.TB, n *node, instance string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.data(), "instances", instance, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Pid <= 0 {
		t.Fatalf("state of %s: %s %v", instance, b, err)
	}
	return st.Pid
}

func killGroup(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
