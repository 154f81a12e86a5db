package journal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// A check runs in a short-lived child process of the same binary
// (`engenho journal-check DIR`, hidden): badger panics on some damage in
// goroutines of its own, where no recover() reaches, and a badger.Open
// that fails leaks what it had opened (two descriptors and a memtable,
// about 10-20 MB, per attempt). In a child both end with the child.
//
// The child writes JSON lines on stdout: a {"record":...} line per record
// salvaged (with --salvage), then one {"result":...} line. It exits 0
// whenever it got as far as the result, damage or not. Any other end (a
// panic's exit 2, a signal) is a crash, which is damage too.

// childLine is one line of the child's output.
type childLine struct {
	Record *Record      `json:"record,omitempty"`
	Result *childResult `json:"result,omitempty"`
}

type childResult struct {
	Report  SalvageReport `json:"report"`
	Damage  *DamageError  `json:"damage,omitempty"`
	Locked  *LockedError  `json:"locked,omitempty"`
	Failure string        `json:"failure,omitempty"`
}

// CheckMain is the child's side: args are [--salvage] DIR. It returns the
// exit code.
func CheckMain(args []string, stdout, stderr io.Writer) int {
	salvage := len(args) > 0 && args[0] == "--salvage"
	if salvage {
		args = args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: journal-check [--salvage] DIR")
		return 2
	}
	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	opts := Options{Dir: args[0]}
	var res childResult
	var err error
	if salvage {
		res.Report, err = Salvage(opts, func(r Record) { _ = enc.Encode(childLine{Record: &r}) })
	} else {
		res.Report.CheckReport, err = Check(opts)
	}
	var de *DamageError
	var le *LockedError
	switch {
	case errors.As(err, &de):
		res.Damage = de
	case errors.As(err, &le):
		res.Locked = le
	case err != nil:
		res.Failure = err.Error()
	}
	_ = enc.Encode(childLine{Result: &res})
	if err := out.Flush(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// ChildOutcome is what RunCheck learned from the child.
type ChildOutcome struct {
	Report SalvageReport
	// Records are the salvaged records (RunCheck with salvage).
	Records []Record
	// Crash is the end of the child's stderr when it crashed (a Go trace):
	// kept for the operator in a file, never logged.
	Crash string
	Took  time.Duration
}

// maxCrashOutput bounds the stderr kept from a crashed child.
const maxCrashOutput = 64 << 10

// RunCheck runs cmd, a child that runs CheckMain on dir, and returns what
// it found. Damage (the child's, or the child crashing) is a *DamageError;
// a lock held by another process is a *LockedError; ctx ending or the
// child not answering is a plain error. The child dies with the calling
// process (Pdeathsig).
func RunCheck(ctx context.Context, cmd *exec.Cmd, dir string) (ChildOutcome, error) {
	start := time.Now()
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: maxCrashOutput}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, &stdout, stderr
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	werr := runLocked(ctx, cmd)
	out := ChildOutcome{Took: time.Since(start)}
	if ctx.Err() != nil {
		return out, fmt.Errorf("journal %s: the check did not finish: %w", dir, ctx.Err())
	}
	res, records, perr := parseChild(stdout.Bytes())
	if werr != nil || perr != nil {
		out.Crash = stderr.String()
		return out, crashDamage(dir, werr, perr, out.Crash)
	}
	out.Report, out.Records = res.Report, records
	switch {
	case res.Damage != nil:
		return out, res.Damage
	case res.Locked != nil:
		return out, res.Locked
	case res.Failure != "":
		return out, fmt.Errorf("journal %s: check: %s", dir, res.Failure)
	}
	return out, nil
}

// runLocked starts and waits for cmd on one locked OS thread: Pdeathsig
// fires when the thread that started the child ends, and Go may end an
// idle thread.
func runLocked(ctx context.Context, cmd *exec.Cmd) error {
	done := make(chan error, 1)
	// started hands over the process once Start returned (nil when it
	// failed): reading cmd.Process here while Start runs is a data race.
	started := make(chan *os.Process, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- nil
			done <- err
			return
		}
		started <- cmd.Process
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		if p := <-started; p != nil {
			_ = p.Kill()
		}
		return <-done
	}
}

func parseChild(out []byte) (childResult, []Record, error) {
	var records []Record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 2*MaxDefinitionBytes)
	for sc.Scan() {
		var line childLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return childResult{}, nil, fmt.Errorf("unreadable output: %w", err)
		}
		if line.Record != nil {
			records = append(records, *line.Record)
		}
		if line.Result != nil {
			return *line.Result, records, nil
		}
	}
	if err := sc.Err(); err != nil {
		return childResult{}, nil, err
	}
	return childResult{}, nil, errors.New("no result")
}

// fileInTrace finds the file a crashed badger named: a path, or a table
// id in its "File Info: [ID: 2, ..." report.
var (
	fileInTrace  = regexp.MustCompile(`\b(\d{5,6}\.(?:sst|vlog|mem))\b`)
	tableInTrace = regexp.MustCompile(`File Info: \[ID: (\d+)`)
)

// crashDamage is the damage of a child that did not get to its result.
func crashDamage(dir string, werr, perr error, stderr string) error {
	how := "it did not answer"
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee):
		how = ee.ProcessState.String()
	case werr != nil:
		return fmt.Errorf("journal %s: starting the check: %w", dir, werr)
	case perr != nil:
		how = perr.Error()
	}
	file := ""
	if m := tableInTrace.FindStringSubmatch(stderr); m != nil {
		if id, err := strconv.ParseUint(m[1], 10, 64); err == nil {
			file = filepath.Join(dir, fmt.Sprintf("%06d.sst", id))
		}
	} else if m := fileInTrace.FindStringSubmatch(stderr); m != nil {
		file = filepath.Join(dir, m[1])
	}
	reason := "badger crashed reading it (" + how + ")"
	if p := firstPanic(stderr); p != "" {
		reason += ": " + p
	}
	return damaged(dir, file, "%s", reason)
}

// firstPanic is the message of the first "panic: " line of a trace.
func firstPanic(stderr string) string {
	for _, line := range bytes.Split([]byte(stderr), []byte("\n")) {
		if p, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("panic: ")); ok && len(bytes.TrimSpace(p)) > 0 {
			s := string(bytes.TrimSpace(p))
			if len(s) > 200 {
				s = s[:200] + "..."
			}
			return s
		}
	}
	return ""
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }

// CheckCommand is the child the engenho binary runs: bin journal-check
// [--salvage] dir.
func CheckCommand(bin, dir string, salvage bool) *exec.Cmd {
	args := []string{"journal-check"}
	if salvage {
		args = append(args, "--salvage")
	}
	cmd := exec.Command(bin, append(args, dir)...)
	cmd.Env = os.Environ()
	return cmd
}
