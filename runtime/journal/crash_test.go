package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

const (
	crashChildEnv  = "ENGENHO_JOURNAL_CRASH_CHILD" // the journal dir
	crashNoSyncEnv = "ENGENHO_JOURNAL_CRASH_NOSYNC"
	crashAcks      = 40
)

// crashChild is the re-executed test binary: it writes one of every intent
// and an event per round, and acknowledges each round on stdout once the
// calls returned, forever, until the parent kills it.
func crashChild(dir string) int {
	j, err := Open(Options{Dir: dir, NoSync: os.Getenv(crashNoSyncEnv) == "1"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("ready %d\n", os.Getpid())
	for i := 1; ; i++ {
		if err := crashRound(j, i); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		fmt.Printf("ack %d\n", i)
	}
}

func crashRound(j *Journal, i int) error {
	svc, host := fmt.Sprintf("svc-%d", i), fmt.Sprintf("host-%d", i)
	def := json.RawMessage(fmt.Sprintf(`{"round":%d}`, i))
	_, err := j.RecordDeployment("web", Deployment{Definition: def, Source: "socket"})
	// An override and the declaration it was set against (SVC-23).
	_, ovErr := j.ChangeStack("web", StackChange{
		Declared:     &Declaration{Digest: strconv.Itoa(i), Replicas: map[string]int{svc: 1}},
		SetOverrides: true, Overrides: []Override{{Service: svc, Field: FieldReplicas, Value: strconv.Itoa(i), File: "1", By: Who{UID: uint32(i)}}},
	})
	return errors.Join(err, ovErr,
		j.StopServiceBy("web", svc, &Who{UID: uint32(i)}),
		j.SaveRollout(RolloutProgress{Stack: "web", Service: svc, Deployment: uint64(i), Revision: "r", SlotsDone: []int{i}}),
		j.MarkFailed(FailedRevision{Stack: "crash", Service: svc, Deployment: uint64(i), Revision: "r"}),
		j.SetDue(host, epoch.Add(time.Duration(i)*time.Second)),
		j.OweRelease(OwedRelease{Host: host, Epoch: strconv.Itoa(i), ETag: "e"}),
		func() error {
			_, err := j.Append(messages.Event{Kind: "test.round", Message: strconv.Itoa(i)})
			return err
		}(),
	)
}

// REL-3, DMN-10, SVC-20: a process SIGKILLed right after acknowledging
// writes leaves every acknowledged intent and event in the journal; the
// reopen reports the unclean close and continues the event sequence
// without a gap. While the child runs, the directory is locked against
// this process, with the child's pid in the error.
func TestSIGKILLAfterAcknowledgedWrites(t *testing.T) {
	for _, mode := range []struct {
		name   string
		noSync string
	}{{"synced", "0"}, {"nosync-process-crash", "1"}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			pid, acked := runAndKill(t, dir, mode.noSync)
			j, _ := openTest(t, dir, nil)
			if pc := j.PreviousClose(); pc.State != UncleanClose || pc.PID != pid {
				t.Fatalf("previous close %+v, want unclean by %d", pc, pid)
			}
			checkRounds(t, j, acked)
		})
	}
}

// runAndKill starts the child, checks the lock, reads acks and kills the
// child with SIGKILL as soon as crashAcks rounds are acknowledged.
func runAndKill(t *testing.T, dir, noSync string) (pid, acked int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashNoSyncEnv+"="+noSync)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	noErr(t, err)
	noErr(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) != 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "ready":
			pid = n
			var le *LockedError
			if _, err := Open(Options{Dir: dir}); !errors.As(err, &le) || le.PID != pid {
				t.Fatalf("open while child runs: %v, want locked by %d", err, pid)
			}
		case "ack":
			acked = n
		}
		if acked >= crashAcks {
			noErr(t, cmd.Process.Signal(syscall.SIGKILL))
			break
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v after %d acks, want SIGKILL", err, acked)
	}
	return pid, acked
}

func checkRounds(t *testing.T, j *Journal, acked int) {
	t.Helper()
	st, found := must2(j.Stack("web"))
	if !found || st.Current.ID < uint64(acked) ||
		string(st.Current.Definition) != fmt.Sprintf(`{"round":%d}`, st.Current.ID) {
		t.Fatalf("desired state %+v after %d acks", st.Current, acked)
	}
	// The last acknowledged override is there, with the declaration it
	// was written with (SVC-23).
	if st.Declared == nil {
		t.Fatalf("no declaration after %d acks", acked)
	}
	round, _ := strconv.Atoi(st.Declared.Digest)
	o, ok := st.Override("svc-"+st.Declared.Digest, FieldReplicas)
	if round < acked || !ok || o.Value != st.Declared.Digest || o.By.UID != uint32(round) {
		t.Fatalf("declaration %+v, override %+v after %d acks", st.Declared, o, acked)
	}
	for i := 1; i <= acked; i++ {
		svc, host := fmt.Sprintf("svc-%d", i), fmt.Sprintf("host-%d", i)
		if !must(j.IsStopped("web", svc)) {
			t.Fatalf("round %d: stopped intent lost", i)
		}
		if all := must(j.StoppedServices()); !slices.ContainsFunc(all, func(s StoppedIntent) bool {
			return s.Service == svc && s.By != nil && s.By.UID == uint32(i)
		}) {
			t.Fatalf("round %d: who stopped %s was lost", i, svc)
		}
		if p, found := must2(j.Rollout("web", svc)); !found || p.SlotsDone[0] != i {
			t.Fatalf("round %d: rollout lost: %+v", i, p)
		}
		if !must(j.IsFailed("crash", svc, uint64(i), "r")) {
			t.Fatalf("round %d: failed revision lost", i)
		}
		if _, found := must2(j.Due(host)); !found {
			t.Fatalf("round %d: due time lost", i)
		}
	}
	if owed := must(j.OwedReleases()); len(owed) < acked {
		t.Fatalf("%d owed releases after %d acks", len(owed), acked)
	}
	last := j.LastSeq()
	evs := must(j.EventsAfter(0, 0))
	if last < uint64(acked) || len(evs) != int(last) {
		t.Fatalf("events: last %d, %d read, %d acked", last, len(evs), acked)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) || e.Message != strconv.Itoa(i+1) {
			t.Fatalf("event %d: %+v", i+1, e)
		}
	}
	if next := must(j.Append(evt("after"))); next != last+1 {
		t.Fatalf("next seq %d after %d", next, last)
	}
}
