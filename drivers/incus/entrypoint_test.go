package incus

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runEntrypoint runs the generated script as PID 1 of fresh pid and network
// namespaces (as it runs inside a container) and returns the unshare
// command, started. It skips where namespaces cannot be made (not root).
func runEntrypoint(t *testing.T, dir string, argv []string, maxLog int64) *exec.Cmd {
	t.Helper()
	script := filepath.Join(dir, "entrypoint")
	if err := os.WriteFile(script, []byte(entrypoint(dir, argv, "", maxLog, false)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("unshare", "--pid", "--net", "--fork", "true").Run(); err != nil {
		t.Skipf("SKIP cannot make pid/net namespaces here (%v): the entrypoint is still covered by the incus tests", err)
	}
	// The busybox image's sh is busybox ash; use it when the host has it.
	shell := []string{"/bin/sh"}
	if _, err := os.Stat("/bin/busybox"); err == nil {
		shell = []string{"/bin/busybox", "sh"}
	}
	// setsid: as under LXC, the init leads its own session and process
	// group (it signals that group on stop).
	args := append([]string{"--pid", "--net", "--fork", "--kill-child", "setsid"}, shell...)
	cmd := exec.Command("unshare", append(args, script)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// DRV-7: the entrypoint brings loopback up, keeps argv exact (quotes and
// spaces), logs stdout and stderr in order and records the exit code.
func TestEntrypointRunsArgvExactly(t *testing.T) {
	dir := t.TempDir()
	argv := []string{"sh", "-c", `echo "$1|$2"; echo to-stderr >&2; ip -o link show lo | grep -q UP && echo lo-up; exit 42`, "arg0", "it's \"quoted\"", "two  spaces"}
	cmd := runEntrypoint(t, dir, argv, 1<<20)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 42 {
		t.Errorf("entrypoint exit: %v, want code 42", err)
	}
	if got := readFile(t, filepath.Join(dir, exitCodeName)); got != "42\n" {
		t.Errorf("exit-code file %q, want 42", got)
	}
	want := "it's \"quoted\"|two  spaces\nto-stderr\nlo-up\n"
	if got := readFile(t, filepath.Join(dir, outputName)); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// DRV-5: SIGTERM (or SIGPWR, what incusd sends) to the init reaches every
// process; the exit status is the command's (killed by TERM: 143).
func TestEntrypointForwardsStopSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGPWR} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd := runEntrypoint(t, dir, []string{"sh", "-c", "echo ready; sleep 3600"}, 1<<20)
			waitFile(t, filepath.Join(dir, outputName))
			initPid := childPid(t, cmd.Process.Pid)
			if err := syscall.Kill(initPid, sig); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if got := readFile(t, filepath.Join(dir, exitCodeName)); got != "143\n" {
				t.Errorf("exit-code after %v: %q, want 143 (sh killed by SIGTERM)", sig, got)
			}
		})
	}
}

// childPid is the one child of pid (unshare's forked PID 1).
func childPid(t *testing.T, pid int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.Atoi(f[0])
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("no child of %d", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The output log past LogMaxBytes is rotated to output.log.1 at start.
func TestEntrypointRotatesBigLog(t *testing.T) {
	dir := t.TempDir()
	old := strings.Repeat("old line\n", 20)
	if err := os.WriteFile(filepath.Join(dir, outputName), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := runEntrypoint(t, dir, []string{"echo", "new run"}, 100)
	_ = cmd.Wait()
	if got := readFile(t, filepath.Join(dir, outputName+".1")); got != old {
		t.Errorf("output.log.1 = %q, want the old log", got)
	}
	if got := readFile(t, filepath.Join(dir, outputName)); got != "new run\n" {
		t.Errorf("output.log = %q, want only the new run", got)
	}
}

func TestLabelFilter(t *testing.T) {
	got := labelFilter(map[string]string{"engenho.stack": "web", "engenho.slot": "0", "odd": `has "quotes"`, "sp": "a b"})
	want := `config.user.engenho.slot eq 0 and config.user.engenho.stack eq web`
	if got != want {
		t.Errorf("labelFilter = %q, want %q", got, want)
	}
}
