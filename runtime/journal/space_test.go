package journal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/messages"
	"golang.org/x/sys/unix"
)

// fakeFree makes j's space check see free bytes, changeable later.
func fakeFree(j *Journal, free *atomic.Int64) {
	j.space.statfs = func(_ string, st *unix.Statfs_t) error {
		st.Bsize, st.Bavail = 1, uint64(free.Load())
		return nil
	}
}

// REL-5, issue 18 (disk): below the reserve the journal refuses every
// write with a *NoSpaceError naming the directory, what is free and the
// reserve, and writes nothing; emitted events are counted, not recorded;
// once there is room again writes go on and one event says how many
// events were not recorded. Nothing acknowledged is lost.
func TestRELNoSpaceRefusesWritesAndRecovers(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), func(o *Options) { o.small = true; o.NoSync = true })
	var free atomic.Int64
	free.Store(1 << 40)
	fakeFree(j, &free)
	before := must(j.RecordDeployment("web", dep(`{"v":1}`, map[string]string{"api": "r1"})))
	first := must(j.Append(messages.Event{Kind: "test.before", Message: "acknowledged"}))

	free.Store(j.space.reserve - 1)
	_, err := j.RecordDeployment("web", dep(`{"v":2}`, map[string]string{"api": "r2"}))
	var nospace *NoSpaceError
	if !errors.Is(err, ErrNoSpace) || !errors.As(err, &nospace) || nospace.Dir != j.opts.Dir ||
		!strings.Contains(err.Error(), "below the") || !strings.Contains(err.Error(), "free space there and retry") {
		t.Fatalf("a write below the reserve: %v", err)
	}
	if err := j.StopService("web", "api"); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("an intent below the reserve: %v", err)
	}
	for i := range 3 {
		if err := j.Emit(messages.Event{Kind: "test.during", Message: fmt.Sprint(i)}); err != nil {
			t.Fatalf("emit below the reserve must not fail the caller: %v", err)
		}
	}
	if _, err := j.Append(messages.Event{Kind: "test.during"}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append below the reserve: %v", err)
	}
	if !j.SpaceShort() {
		t.Fatal("SpaceShort is false below the reserve")
	}

	free.Store(1 << 40)
	last := must(j.Append(messages.Event{Kind: "test.after", Message: "room again"}))
	evs := must(j.EventsAfter(first, 100))
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
	}
	if len(evs) != 2 || evs[0].Kind != messages.KindEventsDropped || !strings.Contains(evs[0].Message, "3 events were not recorded") ||
		evs[1].Kind != "test.after" || evs[1].Seq != last {
		t.Fatalf("events after the room came back: %v %+v", kinds, evs)
	}
	st, found, err := j.Stack("web")
	if err != nil || !found || st.Current.ID != before.Current.ID {
		t.Fatalf("the acknowledged deployment changed: %+v %v %v", st, found, err)
	}
	if stopped, _ := j.IsStopped("web", "api"); stopped {
		t.Fatal("a refused intent was written")
	}
	if err := j.StopService("web", "api"); err != nil || j.SpaceShort() {
		t.Fatalf("an intent once there is room: %v (short %v)", err, j.SpaceShort())
	}
}

// Issue 18 (disk), as root on a real file system: a journal whose disk is
// filled (a tmpfs) keeps the process alive and answers ErrNoSpace; badger
// alone dies of SIGBUS there on the first write (its logs are mapped).
// The journal runs in a child process so a SIGBUS shows as the child's
// death, not the test binary's.
func TestRELFullDiskDoesNotKillTheProcess(t *testing.T) {
	if os.Getenv("ENGENHO_DISKFULL_CHILD") != "" {
		diskFullChild(t, os.Getenv("ENGENHO_DISKFULL_CHILD"))
		return
	}
	mnt := t.TempDir()
	err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=200m")
	drivertest.Need(t, "cgroups", err == nil, fmt.Sprintf("mounting a tmpfs needs root: %v", err))
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRELFullDiskDoesNotKillTheProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "ENGENHO_DISKFULL_CHILD="+mnt)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "DISKFULL OK") {
		t.Fatalf("the journal on a full disk: %v\n%s", err, out)
	}
}

func diskFullChild(t *testing.T, mnt string) {
	j, err := Open(Options{Dir: filepath.Join(mnt, "journal"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	must(j.Append(messages.Event{Kind: "test.before"}))
	f, err := os.Create(filepath.Join(mnt, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break // the disk is full
		}
	}
	f.Close()
	for i := range 1000 {
		if err := j.Emit(messages.Event{Kind: "test.full", Message: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Append(messages.Event{Kind: "test.full"}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if err := os.Remove(filepath.Join(mnt, "ballast")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(messages.Event{Kind: "test.after"}); err != nil {
		t.Fatalf("append once the disk has room: %v", err)
	}
	fmt.Println("DISKFULL OK")
}
