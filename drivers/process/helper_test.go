package process_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/process"
)

// runHelper is the body of a helper process: "daemon:DIR" plays a daemon
// that starts workloads and is then SIGKILLed by the test; "subreaper:DIR"
// checks orphan reaping in a process of its own (a subreaper's wait4(-1)
// must not run inside the test binary, where os/exec is used).
func runHelper(mode string) int {
	kind, dir, _ := strings.Cut(mode, ":")
	switch kind {
	case "daemon":
		return helperDaemon(dir)
	case "subreaper":
		return helperSubreaper(dir)
	case "group":
		return helperGroup(dir)
	}
	fmt.Println("unknown helper mode", mode)
	return 2
}

func helperDaemon(dir string) int {
	ctx := context.Background()
	d, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot, Logger: zerolog.Nop()})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	for _, name := range []string{"survivor", "stopper"} {
		spec := drivers.Spec{Name: name, Labels: drivers.Labels{"role": name}, Command: []string{"sh", "-c", "echo up; sleep 3600"}}
		if err := d.Create(ctx, spec); err != nil {
			fmt.Println("error", err)
			return 1
		}
		if err := d.Start(ctx, name); err != nil {
			fmt.Println("error", err)
			return 1
		}
		st, _ := d.Inspect(ctx, name)
		fmt.Printf("started %s %d %s\n", name, st.Pid, st.StartedAt.Format(time.RFC3339Nano))
	}
	fmt.Println("ready")
	select {} // until the test kills us
}

func helperSubreaper(dir string) int {
	if err := process.BecomeSubreaper(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	ctx := context.Background()
	d, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot, Logger: zerolog.Nop()})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer d.Close()
	// The orphan leaves the group (setsid), outlives the main process and
	// is reparented to us.
	spec := drivers.Spec{Name: "orphaner", Command: []string{"sh", "-c", "setsid sleep 0.3 & echo orphan $!; exit 0"}}
	code := drivers.Spec{Name: "coder", Command: []string{"sh", "-c", "sleep 0.1; exit 5"}}
	for _, s := range []drivers.Spec{spec, code} {
		if err := d.Create(ctx, s); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	exits := make(chan drivers.Exit, 1)
	if err := d.Start(ctx, "coder"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	d.Watch("coder", func(e drivers.Exit) { exits <- e })
	if err := d.Start(ctx, "orphaner"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		rc, _ := d.Logs(ctx, "orphaner", drivers.LogOptions{})
		b, _ := io.ReadAll(rc)
		rc.Close()
		if rest, ok := strings.CutPrefix(string(b), "orphan "); ok {
			pid, _ = strconv.Atoi(strings.TrimSpace(rest))
		}
	}
	if pid == 0 {
		fmt.Println("error no orphan pid")
		return 1
	}
	e := <-exits
	fmt.Printf("code %d\n", e.ExitCode)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, _ := d.Inspect(ctx, "orphaner"); st.State == drivers.StateStopped {
			break
		}
	}
	if ppid := parentOf(pid); ppid != os.Getpid() && ppid != 0 {
		fmt.Printf("error orphan %d has parent %d, not us %d\n", pid, ppid, os.Getpid())
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			fmt.Println("reaped")
			return 0
		}
	}
	fmt.Println("leaked: orphan", pid, "is still in /proc")
	return 1
}

// parentOf returns pid's parent, 0 when unknown.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// startHelper runs the test binary in helper mode and returns it with a
// reader of its stdout.
func startHelper(t *testing.T, mode string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// helperScriptEnv holds the script helperGroup runs (groupScript when
// empty).
const helperScriptEnv = "ENGENHO_PROCESS_HELPER_SCRIPT"

// helperNoCgroupsEnv makes helperGroup's driver run without cgroups.
const helperNoCgroupsEnv = "ENGENHO_PROCESS_HELPER_NO_CGROUPS"

// helperGroup starts a script as "grp" and waits to be SIGKILLed.
func helperGroup(dir string) int {
	ctx := context.Background()
	d, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot, NoCgroups: os.Getenv(helperNoCgroupsEnv) != "", Logger: zerolog.Nop()})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	script := os.Getenv(helperScriptEnv)
	if script == "" {
		script = groupScript
	}
	spec := drivers.Spec{Name: "grp", Command: []string{"sh", "-c", script}}
	if err := d.Create(ctx, spec); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := d.Start(ctx, "grp"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	st, _ := d.Inspect(ctx, "grp")
	fmt.Printf("started grp %d\n", st.Pid)
	fmt.Println("ready")
	select {}
}
