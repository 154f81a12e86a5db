package datadir

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"go.uber.org/goleak"
)

// helperEnv makes the test binary act as another daemon process holding a
// data directory: ENGENHO_DATADIR_HELPER=DIR. It locks DIR, marks the run
// live in phase "adopt", prints "locked", and waits for its stdin to close
// (or to be killed).
const helperEnv = "ENGENHO_DATADIR_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(runHelper(dir))
	}
	goleak.VerifyTestMain(m)
}

func runHelper(dir string) int {
	d, err := Open(dir, clock.New())
	if err == nil {
		err = d.Lock()
	}
	if err == nil {
		err = d.MarkLive("adopt")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// holder is a child process holding a data directory's lock.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startHolder re-execs the test binary as a helper holding dir's lock and
// waits until it says it holds it.
func startHolder(t *testing.T, dir string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		h.stdin.Close()
		h.cmd.Process.Kill()
		h.cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper did not take the lock: %q, %v", line, err)
	}
	return h
}

// release lets the helper exit normally.
func (h *holder) release(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
}

// kill ends the helper with SIGKILL, as a crash would.
func (h *holder) kill(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h.cmd.Wait()
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)

func openTemp(t *testing.T) (*Dir, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	d, err := Open(t.TempDir(), clk)
	if err != nil {
		t.Fatal(err)
	}
	return d, clk
}

func openLocked(t *testing.T) (*Dir, *clock.Fake) {
	t.Helper()
	d, clk := openTemp(t)
	if err := d.Lock(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Unlock() })
	return d, clk
}
