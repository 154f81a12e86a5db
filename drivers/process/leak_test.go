package process_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
)

// DRV-3: Close leaves no goroutine behind (the shared reaper stops with the
// last Driver), even with a watch armed, a follower open and a workload
// still running.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	d := newDriver(t, t.TempDir())
	mustCreate(t, d, shSpec("lingering", "echo up; sleep 3600", nil))
	st := mustStart(t, d, "lingering")
	fired := make(chan struct{}, 1)
	if _, err := d.Watch("lingering", func(drivers.Exit) { fired <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if res, err := d.Exec(ctxT(t), "lingering", []string{"sh", "-c", "echo hi"}); err != nil || string(res.Stdout) != "hi\n" {
		t.Fatalf("Exec: %+v %v", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := d.Logs(ctx, "lingering", drivers.LogOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	cancel()
	rc.Close()
	goleak.VerifyNone(t)
	select {
	case <-fired:
		t.Errorf("a watch fired after Close")
	default:
	}
	// The workload outlived Close; end it (the next Driver reaps it).
	unix.Kill(st.Pid, unix.SIGKILL)
}
