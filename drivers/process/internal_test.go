package process

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
)

func TestParseStartTime(t *testing.T) {
	// A command may contain spaces and ')' (field 2); starttime is field 22.
	stat := "4242 (we ird) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	got, err := parseStartTime([]byte(stat))
	if err != nil || got != 987654 {
		t.Fatalf("parseStartTime: %d %v, want 987654", got, err)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3"} {
		if _, err := parseStartTime([]byte(bad)); err == nil {
			t.Errorf("parseStartTime(%q): no error", bad)
		}
	}
	self, err := procStartTime(os.Getpid())
	if err != nil || self == 0 {
		t.Fatalf("procStartTime(self): %d %v", self, err)
	}
}

func writeRecord(t *testing.T, dir string, rec record) {
	t.Helper()
	idir := filepath.Join(dir, "instances", rec.Spec.Name)
	if err := os.MkdirAll(idir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := rec.save(idir); err != nil {
		t.Fatal(err)
	}
}

// DRV-4: an instance is adopted only when pid and start time both match
// its state file; a reused or vanished pid is never taken for it.
func TestAdoptOnlyWhenPidAndStartTimeMatch(t *testing.T) {
	dir := t.TempDir()
	spec := func(name string) drivers.Spec {
		return drivers.Spec{Name: name, Command: []string{"sleep", "3600"}, Labels: drivers.Labels{"k": name}}
	}
	startedAt := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)

	// The pid is alive (this test binary) but its start time differs:
	// the pid was reused.
	self, _ := procStartTime(os.Getpid())
	writeRecord(t, dir, record{Spec: spec("reused"), Running: true, Pid: os.Getpid(), ProcStart: self + 1, StartedAt: startedAt})

	// The pid is gone.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	writeRecord(t, dir, record{Spec: spec("vanished"), Running: true, Pid: gone.Process.Pid, ProcStart: 1, StartedAt: startedAt})

	// The real thing: a live process with its own start time.
	live := exec.Command("sleep", "3600")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer live.Process.Kill()
	liveStart, err := procStartTime(live.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	writeRecord(t, dir, record{Spec: spec("real"), Running: true, Pid: live.Process.Pid, ProcStart: liveStart, StartedAt: startedAt})

	// A state file that cannot be read is kept, unchanged, under damaged/
	// (REL-5; its run, if any, is ended: TestRELTornStateFileIsQuarantined).
	broken := filepath.Join(dir, "instances", "broken")
	os.MkdirAll(broken, 0o700)
	os.WriteFile(filepath.Join(broken, stateFile), []byte("{not json"), 0o600)

	d, err := New(Options{Dir: dir, CgroupRoot: os.Getenv("ENGENHO_PROCESS_TEST_CGROUP_ROOT"), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer d.Close()
	ctx := context.Background()
	for _, name := range []string{"reused", "vanished"} {
		st, err := d.Inspect(ctx, name)
		if err != nil || st.State != drivers.StateStopped || st.Pid != 0 || !st.StartedAt.IsZero() || st.ExitCode != -1 {
			t.Errorf("%s: %+v %v, want stopped, no pid, exit -1", name, st, err)
		}
		rec, _ := loadRecord(filepath.Join(dir, "instances", name))
		if rec == nil || rec.Running {
			t.Errorf("%s: state file still says running: %+v", name, rec)
		}
	}
	st, err := d.Inspect(ctx, "real")
	if err != nil || st.State != drivers.StateRunning || st.Pid != live.Process.Pid || !st.StartedAt.Equal(startedAt) {
		t.Fatalf("real: %+v %v, want adopted", st, err)
	}
	if _, err := d.Inspect(ctx, "broken"); err == nil {
		t.Errorf("an unreadable instance was loaded")
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "damaged", "broken-*", stateFile))
	if len(kept) != 1 {
		t.Fatalf("the unreadable state file was not kept under damaged/: %v", kept)
	}
	if b, _ := os.ReadFile(kept[0]); string(b) != "{not json" {
		t.Errorf("the unreadable state file was changed")
	}

	exited := make(chan drivers.Exit, 1)
	if _, err := d.Watch("real", func(e drivers.Exit) { exited <- e }); err != nil {
		t.Fatal(err)
	}
	live.Process.Kill()
	live.Wait() // os/exec reaps it: it is its child, not the driver's
	select {
	case e := <-exited:
		if e.ExitCode != -1 {
			t.Errorf("adopted exit code %d, want -1 (unknown)", e.ExitCode)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit seen for the adopted process")
	}
}

// DRV-3, DRV-4: a pidfd on a group's leader names the group after the
// leader died and was reaped by its parent (an adopted run's leader is
// reaped by whoever inherited it): signalPgrp still reaches the member it
// left, whether the kernel names the group by pidfd (Linux 6.9) or, as
// before, by number.
func TestSignalPgrpAfterTheLeaderIsReaped(t *testing.T) {
	for _, byNumber := range []bool{false, true} {
		old := groupByNumber.Load()
		groupByNumber.Store(byNumber)
		leader := exec.Command("sh", "-c", "sleep 1000 & echo $!; exec sleep 1000")
		leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := leader.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
		var member int
		if _, err := fmt.Fscan(out, &member); err != nil {
			t.Fatal(err)
		}
		pgid := leader.Process.Pid
		fd, err := unix.PidfdOpen(pgid, 0)
		if err != nil {
			t.Fatal(err)
		}
		leader.Process.Kill()
		leader.Wait() // reaped: pid pgid names no process any more
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pgid)); !os.IsNotExist(err) {
			t.Fatalf("leader %d not reaped", pgid)
		}
		signalPgrp(fd, pgid, unix.SIGKILL)
		unix.Close(fd)
		gone := false
		for deadline := time.Now().Add(5 * time.Second); !gone && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", member))
			gone = err != nil || strings.Contains(string(b), ") Z ")
		}
		if !gone {
			unix.Kill(member, unix.SIGKILL)
			t.Errorf("by number %v: the member %d outlived signalPgrp", byNumber, member)
		}
		groupByNumber.Store(old)
	}
}

// DRV-3: a descriptor opened without close-on-exec (as one inherited from
// a shell is) is found and marked; one already marked is left alone.
func TestMarkInheritedCloseOnExec(t *testing.T) {
	open := func(flags int) int {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	inherited, own := open(0), open(unix.O_CLOEXEC)
	marked, err := MarkInheritedCloseOnExec()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(marked, inherited) || slices.Contains(marked, own) {
		t.Errorf("marked %v; want %d (inherited) and not %d (already close-on-exec)", marked, inherited, own)
	}
	if flags, err := unix.FcntlInt(uintptr(inherited), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor %d: flags %d %v, want close-on-exec", inherited, flags, err)
	}
	if again, _ := MarkInheritedCloseOnExec(); slices.Contains(again, inherited) {
		t.Errorf("marked %d twice", inherited)
	}
}
