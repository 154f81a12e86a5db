package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/schedule"
	"github.com/engenho/engenho/runtime/control"
	"golang.org/x/sys/unix"
)

// diskSize is the size of the file system node a's data directory lives
// on when the machine lets the campaign make one (root, mkfs.ext4, a loop
// device): an ext4 image of its own, so disk.full fills it and nothing
// else (ext4, not tmpfs: journal.readonly needs chattr).
const diskSize = "512M"

// mountDataDisk puts node a's data directory on a fresh ext4 file system
// in a sparse image beside it. It says why not when it cannot: the disk
// kinds are then not drawn.
func mountDataDisk(dir string) (bool, string) {
	img := dir + ".img"
	steps := [][]string{
		{"truncate", "-s", diskSize, img},
		{"mkfs.ext4", "-q", "-F", "-m", "0", img},
		{"mkdir", "-p", dir},
		{"mount", "-o", "loop", img, dir},
	}
	for _, st := range steps {
		if out, err := exec.Command(st[0], st[1:]...).CombinedOutput(); err != nil {
			_ = os.Remove(img)
			return false, fmt.Sprintf("making node a's data disk: %s: %v %s (needs root, mkfs.ext4 and a loop device)",
				strings.Join(st, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return true, "node a's data directory on a " + diskSize + " ext4 file system of its own (a loop device)"
}

// unmountDataDisk undoes mountDataDisk once every daemon is gone.
func unmountDataDisk(dir string) {
	_ = unix.Unmount(dir, unix.MNT_DETACH)
	_ = os.Remove(dir + ".img")
}

// ballastPath is the file disk.full fills node a's disk with.
func (c *campaign) ballastPath() string { return filepath.Join(c.a.dataDir(), "chaos-ballast") }

// fill writes path until the file system is full and returns how many
// bytes it wrote.
func fill(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, unix.ENOSPC) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// injectDiskFull fills node a's data disk to the last byte and holds it
// full for hold_ms: the daemon must keep running what runs (nothing
// healthy restarted), refuse an intent with an error that says the disk is
// short (an acknowledged intent must be durable, and on a full disk none
// can be), and serve again once the space is back. With kill=1 the daemon
// is also SIGKILLed while the disk is full and relaunched: its boot must
// wait for room (not crash, not call the journal damaged) and then adopt
// every workload.
func (c *campaign) injectDiskFull(ctx context.Context, f schedule.Fault, inj *injected) error {
	inj.target = c.a.dataDir()
	n, err := fill(c.ballastPath())
	if err != nil {
		_ = os.Remove(c.ballastPath())
		return fmt.Errorf("filling %s: %w", inj.target, err)
	}
	defer os.Remove(c.ballastPath())
	inj.detail = fmt.Sprintf("filled with %d MiB", n>>20)
	answer := c.intentOnFullDisk(ctx, inj)
	inj.detail += "; a scale on the full disk: " + answer.note
	if !answer.ok {
		inj.violations = append(inj.violations, invariant.Violation{Invariant: invariant.FaultEffect, Subject: "node a",
			Safety: true, Evidence: "on a full disk: " + answer.note})
	}
	if f.Param("kill") == 1 {
		old := c.a.currentPid()
		if err := c.a.kill(); err != nil {
			return err
		}
		if err := c.a.launch(); err != nil {
			return err
		}
		inj.detail += fmt.Sprintf("; pid %d killed and relaunched on the full disk", old)
		inj.witness = func(o observation) bool { return o.status.Daemon.PID != old }
	}
	if err := sleep(ctx, time.Duration(f.Param("hold_ms"))*time.Millisecond); err != nil {
		return err
	}
	if !c.a.alive() {
		inj.violations = append(inj.violations, invariant.Violation{Invariant: invariant.FaultEffect, Subject: "node a", Safety: true,
			Evidence: "the daemon exited on a full disk (see " + c.a.logPath() + ")"})
		_ = c.a.launch() // so the campaign can go on
	}
	return os.Remove(c.ballastPath())
}

// fullDiskAnswer is how the daemon answered an intent on a full disk.
type fullDiskAnswer struct {
	ok   bool
	note string
}

// intentOnFullDisk asks a stop of jobs/worker (a start when it is
// stopped), an intent the journal must record, and judges the answer:
// refused as unavailable, naming the free space. Acknowledged is possible
// only while the journal still had its reserve: it is then recorded in
// the campaign's want like any intent.
func (c *campaign) intentOnFullDisk(ctx context.Context, inj *injected) fullDiskAnswer {
	sw, _ := c.want.Service(svcWorker)
	in := schedule.Intent{Op: "stop", Service: svcWorker}
	if sw.Stopped {
		in.Op = "start"
	}
	ack, err := c.intent(ctx, c.a, in)
	var ce *control.Error
	switch {
	case err == nil:
		inj.acks = append(inj.acks, ack)
		return fullDiskAnswer{ok: true, note: in.String() + " acknowledged (the journal still had room)"}
	case errors.As(err, &ce) && ce.Code == control.CodeUnavailable && strings.Contains(ce.Message, "free"):
		return fullDiskAnswer{ok: true, note: in.String() + " refused: " + ce.Message}
	default:
		return fullDiskAnswer{ok: false, note: in.String() + " answered " + err.Error() + ", want a refusal that says the disk is short"}
	}
}

// injectTornState kills node a's daemon, tears one process instance's
// state file in half (a torn write, as a disk or file system that lost
// part of it would leave), and relaunches the daemon: it must not crash,
// must end the run it can no longer manage (no orphan), fill the slot
// afresh, and touch nothing else (REL-5).
func (c *campaign) injectTornState(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	victim, err := c.pickVictim(f, before, "process", inj)
	if err != nil {
		return err
	}
	state := filepath.Join(c.a.dataDir(), "instances", victim.Name, "state.json")
	old := c.a.currentPid()
	if err := c.a.kill(); err != nil {
		return err
	}
	b, err := os.ReadFile(state)
	if err != nil {
		_ = c.a.launch()
		return fmt.Errorf("reading %s: %w", state, err)
	}
	if err := os.WriteFile(state, b[:len(b)/2], 0o600); err != nil {
		_ = c.a.launch()
		return fmt.Errorf("tearing %s: %w", state, err)
	}
	if err := c.a.launch(); err != nil {
		return err
	}
	inj.detail = fmt.Sprintf("pid %d killed, %s torn to %d of %d bytes, relaunched", old, state, len(b)/2, len(b))
	inj.witness = func(o observation) bool {
		_, still := o.replica(victim.Name)
		return o.status.Daemon.PID != old && !still
	}
	return nil
}
