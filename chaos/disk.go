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
	"github.com/engenho/engenho/drivers/drivertest/faultfs"
	"github.com/engenho/engenho/runtime/control"
	"golang.org/x/sys/unix"
)

// diskSize is the size of the file system node a's data directory lives
// on when the machine lets the campaign make one (root, mkfs.ext4, a loop
// device): an ext4 image of its own, so disk.full fills it and nothing
// else (ext4, not tmpfs: journal.readonly needs chattr).
const diskSize = "512M"

// dataDisk is node a's data directory's own file system, when the
// machine lets the campaign make one.
type dataDisk struct {
	ok   bool
	note string
	// fault is the FUSE loopback between the daemon and that file system
	// (disk.eio); nil when FUSE cannot be mounted here (faultNote says why).
	fault     *faultfs.FS
	faultNote string
}

// mountDataDisk puts node a's data directory on a fresh ext4 file system
// in a sparse image beside it and, where FUSE can be mounted, behind a
// fault file system: the ext4 file system is mounted on DIR.disk and the
// loopback on DIR. It says why not when it cannot: the disk kinds are then
// not drawn.
func mountDataDisk(dir string) dataDisk {
	img, backing := dir+".img", dir+".disk"
	steps := [][]string{
		{"truncate", "-s", diskSize, img},
		{"mkfs.ext4", "-q", "-F", "-m", "0", img},
		{"mkdir", "-p", dir, backing},
		{"mount", "-o", "loop", img, backing},
	}
	for _, st := range steps {
		if out, err := exec.Command(st[0], st[1:]...).CombinedOutput(); err != nil {
			_ = os.Remove(img)
			return dataDisk{note: fmt.Sprintf("making node a's data disk: %s: %v %s (needs root, mkfs.ext4 and a loop device)",
				strings.Join(st, " "), err, strings.TrimSpace(string(out)))}
		}
	}
	d := dataDisk{ok: true, note: "node a's data directory on a " + diskSize + " ext4 file system of its own (a loop device)"}
	fault, err := faultfs.Mount(backing, dir)
	if err == nil {
		d.fault = fault
		d.faultNote = "node a's data disk behind a FUSE loopback that can fail its writes with EIO"
		return d
	}
	d.faultNote = err.Error()
	// No FUSE: the ext4 file system goes on DIR itself.
	_ = unix.Unmount(backing, 0)
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		_ = os.Remove(img)
		return dataDisk{note: fmt.Sprintf("mounting node a's data disk on %s: %v %s", dir, err, strings.TrimSpace(string(out)))}
	}
	return d
}

// unmountDataDisk undoes mountDataDisk once every daemon is gone.
func unmountDataDisk(dir string, d dataDisk) {
	if d.fault != nil {
		_ = d.fault.Unmount()
		_ = unix.Unmount(dir+".disk", unix.MNT_DETACH)
	} else {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
	}
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
	answer := c.intentOnBadDisk(ctx, inj, "free", true)
	inj.detail += "; an intent on the full disk: " + answer.note
	if !answer.ok {
		inj.violations = append(inj.violations, invariant.Violation{Invariant: invariant.FaultEffect, Subject: "node a",
			Safety: true, Evidence: "on a full disk: " + answer.note})
	}
	if f.Param("kill") == 1 {
		if err := c.killAndRelaunchA(inj, "on the full disk"); err != nil {
			return err
		}
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

// killAndRelaunchA SIGKILLs node a's daemon and starts it again; the
// fault has taken effect once a new pid answers.
func (c *campaign) killAndRelaunchA(inj *injected, where string) error {
	old, err := c.a.relaunch(inj, nil, nil)
	if err != nil {
		return err
	}
	inj.detail += strings.TrimSpace(fmt.Sprintf("; pid %d killed and relaunched %s", old, where))
	return nil
}

// diskAnswer is how the daemon answered an intent on a full or failing
// disk.
type diskAnswer struct {
	ok   bool
	note string
}

// intentOnBadDisk asks a stop of jobs/worker (a start when it is
// stopped), an intent the journal must record, and judges the answer:
// refused as unavailable, with a message that says what is wrong with the
// disk (says). Acknowledged is fine only when ackOK (a full disk whose
// journal still had its reserve): it is then recorded in the campaign's
// want like any intent. A refused intent stays out of the want: if it
// came into force anyway, the final checks see a service that is not as
// wanted.
func (c *campaign) intentOnBadDisk(ctx context.Context, inj *injected, says string, ackOK bool) diskAnswer {
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
		if ackOK {
			return diskAnswer{ok: true, note: in.String() + " acknowledged (the journal still had room)"}
		}
		return diskAnswer{ok: false, note: in.String() + " acknowledged, though no write can reach the disk"}
	case errors.As(err, &ce) && ce.Code == control.CodeUnavailable && strings.Contains(ce.Message, says):
		return diskAnswer{ok: true, note: in.String() + " refused: " + ce.Message}
	default:
		return diskAnswer{ok: false, note: in.String() + " answered " + err.Error() + ", want a refusal (unavailable) that says " + says}
	}
}

// injectDiskEIO fails every write to node a's data disk with EIO for
// hold_ms: below the daemon, in the kernel (a FUSE loopback), so badger's
// syncs, the state files and the logs all meet it. The daemon must keep
// running what runs (nothing healthy restarted), refuse an intent as
// unavailable saying the disk failed a write, keep that intent out of
// force, and take intents again once the disk writes. With kill=1 it is
// SIGKILLed as the failure ends and relaunched: every intent it
// acknowledged must be in force after (REL-3) and the refused one must
// not, which the final checks see through the campaign's want.
func (c *campaign) injectDiskEIO(ctx context.Context, f schedule.Fault, inj *injected) error {
	fs := c.disk.fault
	inj.target = c.a.dataDir()
	before := fs.Refused()
	fs.FailWrites(true)
	defer fs.FailWrites(false)
	answer := c.intentOnBadDisk(ctx, inj, "the disk failed a write", false)
	inj.detail = "writes fail with EIO; an intent on the failing disk: " + answer.note
	if !answer.ok {
		inj.violations = append(inj.violations, invariant.Violation{Invariant: invariant.FaultEffect, Subject: "node a",
			Safety: true, Evidence: "on a disk that fails writes: " + answer.note})
	}
	if err := sleep(ctx, time.Duration(f.Param("hold_ms"))*time.Millisecond); err != nil {
		return err
	}
	fs.FailWrites(false)
	inj.detail += fmt.Sprintf("; %d writes failed in %dms", fs.Refused()-before, f.Param("hold_ms"))
	if !c.a.alive() {
		inj.violations = append(inj.violations, invariant.Violation{Invariant: invariant.FaultEffect, Subject: "node a", Safety: true,
			Evidence: "the daemon exited on a disk that failed writes (see " + c.a.logPath() + ")"})
		return c.a.launch() // so the campaign can go on
	}
	after := c.intentAfterTheFailure(ctx, inj)
	inj.detail += "; then " + after.note
	if !after.ok {
		inj.violations = append(inj.violations, invariant.Violation{Invariant: invariant.FaultEffect, Subject: "node a",
			Evidence: "once the disk wrote again: " + after.note})
	}
	if f.Param("kill") == 1 {
		return c.killAndRelaunchA(inj, "")
	}
	return nil
}

// intentAfterTheFailure scales shop/web (to 2, or back to 3) once the
// disk writes again: it must be acknowledged, within a few seconds. The
// journal's first write after a failed one puts its memory table on disk,
// so a refused intent kept in that table (the keep-failed-write plant)
// becomes durable here, and the kill that may follow brings it into force.
func (c *campaign) intentAfterTheFailure(ctx context.Context, inj *injected) diskAnswer {
	sw, _ := c.want.Service(svcWeb)
	in := schedule.Intent{Op: "scale", Service: svcWeb, Replicas: 2}
	if sw.Replicas == 2 {
		in.Replicas = 3
	}
	var err error
	for range 5 {
		var ack invariant.Ack
		if ack, err = c.intent(ctx, c.a, in); err == nil {
			inj.acks = append(inj.acks, ack)
			inj.touch(svcWeb, 0)
			return diskAnswer{ok: true, note: in.String() + " acknowledged"}
		}
		if serr := sleep(ctx, time.Second); serr != nil {
			return diskAnswer{ok: false, note: serr.Error()}
		}
	}
	return diskAnswer{ok: false, note: in.String() + " answered " + err.Error() + " five times in 5s, want it acknowledged"}
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
	var b []byte
	old, err := c.a.relaunch(inj, nil, func() error {
		var err error
		if b, err = os.ReadFile(state); err != nil {
			_ = c.a.launch()
			return fmt.Errorf("reading %s: %w", state, err)
		}
		if err := os.WriteFile(state, b[:len(b)/2], 0o600); err != nil {
			_ = c.a.launch()
			return fmt.Errorf("tearing %s: %w", state, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	inj.detail = fmt.Sprintf("pid %d killed, %s torn to %d of %d bytes, relaunched", old, state, len(b)/2, len(b))
	inj.witness = func(o observation) bool {
		_, still := o.replica(victim.Name)
		return o.status.Daemon.PID != old && !still
	}
	return nil
}
