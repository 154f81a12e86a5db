package process_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/process"
)

// batchScript counts its runs in ./n and writes 100 lines tagged with the
// run number, then waits.
const batchScript = `n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; i=0; while [ $i -lt 100 ]; do echo run$n-line$i-padding-padding-padding; i=$((i+1)); done; echo run$n-done; sleep 3600`

// DRV-3: output goes to size-rotated files: rotated when full (checked
// every second on the clock and at each start), LogFiles copies kept, and
// Logs reads across them.
func TestLogRotation(t *testing.T) {
	dir := t.TempDir()
	fc := clock.NewFake(time.Unix(1_700_000_000, 0))
	d, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot, Clock: fc, Logger: zerolog.Nop(), LogMaxBytes: 1000, LogFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	spec := shSpec("chatty", batchScript, nil)
	spec.WorkingDir = t.TempDir()
	mustCreate(t, d, spec)
	logDir := filepath.Join(dir, "instances", "chatty")
	size := func(i int) int64 {
		name := "output.log"
		if i > 0 {
			name += "." + strconv.Itoa(i)
		}
		fi, err := os.Stat(filepath.Join(logDir, name))
		if err != nil {
			return -1
		}
		return fi.Size()
	}

	mustStart(t, d, "chatty")
	waitLogs(t, d, "chatty", "run1-done")
	fc.Advance(time.Second) // the periodic check rotates the full file
	if size(0) != 0 || size(1) < 1000 || size(2) != -1 {
		t.Fatalf("after the tick: sizes %d %d %d, want 0, >=1000, none", size(0), size(1), size(2))
	}
	if got := tail(t, d, "chatty", 2); got != "run1-line99-padding-padding-padding\nrun1-done\n" {
		t.Errorf("Tail 2 from the rotated file: %q", got)
	}

	// Run 2 starts on the empty file; runs 3 and 4 find it full and Start
	// rotates it. With LogFiles 2, run1 is pushed out, run2 is in .2,
	// run3 in .1, run4 current.
	for run := 2; run <= 4; run++ {
		d.Kill(ctxT(t), "chatty")
		mustStart(t, d, "chatty")
		waitLogs(t, d, "chatty", fmt.Sprintf("run%d-done", run))
	}
	all := readLogs(t, d, "chatty")
	if strings.Contains(all, "run1-") {
		t.Errorf("run1 should have been rotated away:\n%.200s", all)
	}
	for _, want := range []string{"run2-done", "run3-done", "run4-done"} {
		if !strings.Contains(all, want) {
			t.Errorf("Logs lack %s", want)
		}
	}
	if i2, i3, i4 := strings.Index(all, "run2-line0-"), strings.Index(all, "run3-line0-"), strings.Index(all, "run4-line0-"); i2 > i3 || i3 > i4 {
		t.Errorf("runs out of order: %d %d %d", i2, i3, i4)
	}
	if size(3) != -1 {
		t.Errorf("more than LogFiles rotated files kept")
	}
	if got := tail(t, d, "chatty", 102); !strings.HasPrefix(got, "run3-done\nrun4-line0-") {
		t.Errorf("Tail across files: %.60q...", got)
	}
	d.Kill(ctxT(t), "chatty")
}

func tail(t *testing.T, d drivers.Driver, name string, n int) string {
	t.Helper()
	rc, err := d.Logs(ctxT(t), name, drivers.LogOptions{Tail: n})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

// DRV-3: a follower keeps streaming, in order, across rotations.
func TestLogsFollowAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	d, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot, Logger: zerolog.Nop(), LogMaxBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mustCreate(t, d, shSpec("ticker", `i=0; while :; do echo tick$i-padding-padding; i=$((i+1)); sleep 0.05; done`, nil))
	mustStart(t, d, "ticker")
	defer d.Kill(ctxT(t), "ticker")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	rc, err := d.Logs(ctx, "ticker", drivers.LogOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rotated := filepath.Join(dir, "instances", "ticker", "output.log.1")
	tickRE := regexp.MustCompile(`tick(\d+)-padding-padding\n`)
	var got strings.Builder
	buf := make([]byte, 512)
	// Read until a rotation has happened and 10 more lines came after it.
	linesAtRotation := -1
	for {
		n, err := rc.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("follow ended early (%v) after %q", err, got.String())
		}
		lines := strings.Count(got.String(), "\n")
		if _, err := os.Stat(rotated); err == nil && linesAtRotation < 0 {
			linesAtRotation = lines
		}
		if linesAtRotation >= 0 && lines >= linesAtRotation+10 {
			break
		}
	}
	cancel()
	// Copy-then-truncate may lose a line written in the instant between
	// the two; order must hold and nearly everything must arrive.
	ticks := tickRE.FindAllStringSubmatch(got.String(), -1)
	last, missing := -1, 0
	for _, m := range ticks {
		n, _ := strconv.Atoi(m[1])
		if n <= last {
			t.Fatalf("tick%d after tick%d: out of order or repeated:\n%s", n, last, got.String())
		}
		missing += n - last - 1
		last = n
	}
	if missing > 2 || ticks[0][1] != "0" {
		t.Errorf("followed %d ticks up to tick%d, %d missing:\n%s", len(ticks), last, missing, got.String())
	}
}

// PERF-3, DRV-3: a log file that stopped growing is left to inotify, and
// with no file being written the rotation tick is not armed at all; a
// write to the file makes it checked again, and a full file is still
// rotated at the next tick.
func TestPERF3QuietLogLeftToInotify(t *testing.T) {
	dir := t.TempDir()
	fc := clock.NewFake(time.Unix(1_700_000_000, 0))
	d, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot, Clock: fc, Logger: zerolog.Nop(), LogMaxBytes: 1000, LogFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mustCreate(t, d, shSpec("quiet", "echo hello; sleep 3600", nil))
	mustStart(t, d, "quiet")
	defer d.Kill(ctxT(t), "quiet")
	waitLogs(t, d, "quiet", "hello")
	if hot, _, armed := d.LogCheck("quiet"); !hot || !armed {
		t.Fatalf("a started run's file: hot %v, tick armed %v; want both", hot, armed)
	}
	fc.Advance(time.Second) // first size seen
	fc.Advance(time.Second) // the same size: left to inotify
	hot, watched, armed := d.LogCheck("quiet")
	if hot || armed {
		t.Fatalf("a quiet file: hot %v, tick armed %v; want neither", hot, armed)
	}
	if !watched {
		t.Skip("inotify cannot watch here: quiet files are polled every second (the fallback)")
	}

	// A write to the file (as the workload would) wakes the check.
	log := filepath.Join(dir, "instances", "quiet", "output.log")
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(strings.Repeat("x", 1200) + "\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for {
		if hot, _, armed := d.LogCheck("quiet"); hot && armed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a write to a quiet file did not make it hot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	fc.Advance(time.Second)
	if fi, err := os.Stat(log + ".1"); err != nil || fi.Size() < 1000 {
		t.Fatalf("the full file was not rotated at the tick: %v", err)
	}
}
