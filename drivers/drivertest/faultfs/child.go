package faultfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/drivertest"
)

// A process must not serve a FUSE mount it maps files of (badger maps
// its logs): a page fault on the mapping waits for the server while the
// server waits for the faulting thread's memory lock, and the process
// hangs unkillable. Tests run the file system in a child process instead:
// their test binary, started again with these variables set.
const (
	envBacking = "ENGENHO_FAULTFS_BACKING"
	envDir     = "ENGENHO_FAULTFS_DIR"
)

// ServeIfChild serves the fault file system and exits when this process
// is a child that Start started; otherwise it returns at once. Call it
// first in TestMain of every package whose tests call Start.
func ServeIfChild() {
	backing, dir := os.Getenv(envBacking), os.Getenv(envDir)
	if backing == "" || dir == "" {
		return
	}
	os.Exit(serve(backing, dir, os.Stdin, os.Stdout))
}

// serve mounts, says "ready" (or why not), then answers each command
// ("fail", "pass") with "ok REFUSED" until its input ends, and unmounts.
func serve(backing, dir string, in io.Reader, out io.Writer) int {
	f, err := Mount(backing, dir)
	if errors.Is(err, ErrUnavailable) {
		fmt.Fprintf(out, "unavailable %v\n", err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(out, "error %v\n", err)
		return 1
	}
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f.FailWrites(sc.Text() == "fail")
		fmt.Fprintf(out, "ok %d\n", f.Refused())
	}
	if err := f.Unmount(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Child is a fault file system served by a child process.
type Child struct {
	dir, backing string
	cmd          *exec.Cmd
	in           io.WriteCloser
	out          *bufio.Reader
}

// Start mounts a loopback of backing on dir, served by this test binary
// started again (its TestMain must call ServeIfChild). The error is
// ErrUnavailable when FUSE cannot be mounted here.
func Start(backing, dir string) (*Child, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBacking+"="+backing, envDir+"="+dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("faultfs: starting the server: %w", err)
	}
	c := &Child{dir: dir, backing: backing, cmd: cmd, in: in, out: bufio.NewReader(out)}
	line, err := c.out.ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case line == "ready":
		return c, nil
	case strings.HasPrefix(line, "unavailable "):
		err = fmt.Errorf("%w: %s", ErrUnavailable, strings.TrimPrefix(line, "unavailable "))
	case err == nil:
		err = fmt.Errorf("faultfs: the server said %q", line)
	}
	_ = in.Close()
	_ = cmd.Wait()
	return nil, err
}

// Dir is where the file system is mounted.
func (c *Child) Dir() string { return c.dir }

// Backing is the directory it passes through to.
func (c *Child) Backing() string { return c.backing }

// FailWrites switches the failure on or off and returns how many
// operations were refused so far.
func (c *Child) FailWrites(on bool) (int64, error) {
	cmd := "pass"
	if on {
		cmd = "fail"
	}
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		return 0, fmt.Errorf("faultfs: %w", err)
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("faultfs: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(line), "ok "), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("faultfs: the server said %q", line)
	}
	return n, nil
}

// Unmount ends the child, which unmounts.
func (c *Child) Unmount() error {
	_ = c.in.Close()
	if err := c.cmd.Wait(); err != nil {
		return fmt.Errorf("faultfs: the server of %s: %w", c.dir, err)
	}
	return nil
}

// StartT is Start for a test: it skips the test with the reason when FUSE
// cannot be mounted here (fails it under ENGENHO_REQUIRE=fuse), fails it
// on any other error, and unmounts at its cleanup (register what uses
// the mount after, so that it is closed first).
func StartT(t testing.TB, backing, dir string) *Child {
	t.Helper()
	c, err := Start(backing, dir)
	if errors.Is(err, ErrUnavailable) {
		drivertest.Need(t, "fuse", false, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return c
}
