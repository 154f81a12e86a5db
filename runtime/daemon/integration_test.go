package daemon_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/runtime/control"
)

const slowRollout = `      update_config:
        parallelism: 1
        delay: 4s
        order: stop-first
        monitor: 1s`

// DMN-9, SVC-14, REL-3: the real daemon is SIGKILLed mid-rollout and
// started again. The rollout resumes at the slot it reached (the slot
// already done is not redone), no healthy replica is restarted by the
// daemon's restart, and every intent acknowledged before the kill is in the
// journal after it.
func TestDMN9KillMidRolloutResumes(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	n.start("running")
	v1 := n.writeFile("roll-v1.yaml", webStack("roll", "v1", 3, slowRollout))
	n.mustCLI("apply", v1, "--wait")
	before := n.service("roll", "web")
	if !converged(before) {
		t.Fatalf("v1 not converged: %+v", before)
	}
	idleBefore := instances(n.service("roll", "idle"))

	v2 := n.writeFile("roll-v2.yaml", webStack("roll", "v2", 3, slowRollout))
	n.mustCLI("apply", v2)
	// Wait until slot 1 is done and the batch delay holds slot 2 back.
	var mid map[int]string
	n.eventually("slot 1 updated", 60*time.Second, func() bool {
		s := n.service("roll", "web")
		mid = map[int]string{}
		for _, r := range s.Replicas {
			if r.Revision == s.Revision && r.InRotation {
				mid[r.Slot] = r.Instance
			}
		}
		return s.Rollout != nil && len(s.Rollout.Slots) == 3 && s.Rollout.Slots[0].State == "done" && s.Rollout.Slots[1].State == "pending"
	})
	atKill := n.service("roll", "web")
	// An intent acknowledged just before the kill (REL-3).
	n.mustCLI("service", "stop", "roll/idle")
	n.kill()

	n.start("running")
	n.eventually("rollout resumed and converged", 90*time.Second, func() bool {
		s := n.service("roll", "web")
		return converged(s) && s.Revision == atKill.Revision && len(s.Replicas) == 3
	})
	after := n.service("roll", "web")
	startedAt := instances(after)
	for slot, inst := range mid {
		was := instances(atKill)[inst]
		if got, ok := startedAt[inst]; !ok || !got.Equal(was) {
			t.Errorf("slot %d's new instance %s was redone or restarted (started %v, was %v)", slot, inst, got, was)
		}
	}
	for _, r := range after.Replicas {
		if r.Restarts != 0 {
			t.Errorf("replica %s restarted %d times", r.Instance, r.Restarts)
		}
	}
	if s := n.service("roll", "idle"); !s.Stopped {
		t.Errorf("the acknowledged service stop was lost: %+v", s)
	}
	_ = idleBefore
	if s := n.service("roll", "web"); s.Deployment != atKill.Deployment {
		t.Errorf("deployment %s after restart, %s acknowledged", s.Deployment, atKill.Deployment)
	}
}

// DMN-9: a daemon killed with SIGKILL adopts its healthy replicas without
// restarting any.
func TestDMN9AdoptionAfterSIGKILL(t *testing.T) {
	n := newNode(t)
	n.start("running")
	n.mustCLI("apply", n.writeFile("a.yaml", webStack("adopt", "v1", 2, "")), "--wait")
	before := instances(n.service("adopt", "web"))
	n.kill()
	n.start("running")
	n.eventually("converged again", 60*time.Second, func() bool { return converged(n.service("adopt", "web")) })
	after := instances(n.service("adopt", "web"))
	for inst, at := range before {
		if !after[inst].Equal(at) {
			t.Errorf("%s restarted: started %v, was %v", inst, after[inst], at)
		}
	}
	st, _ := n.status()
	if st.Daemon.PreviousRun != "crashed" {
		t.Errorf("previous run %q, want crashed", st.Daemon.PreviousRun)
	}
}

// DMN-2: a second daemon on the same data directory exits at once, naming
// the holder's pid.
func TestDMN2SecondDaemonRefused(t *testing.T) {
	n := newNode(t)
	n.start("running")
	out, code := n.cli("daemon", "--config", n.config)
	if code == 0 || !strings.Contains(out, "pid") || !strings.Contains(out, itoa(n.cmd.Process.Pid)) {
		t.Fatalf("second daemon: exit %d, output %q (holder pid %d)", code, out, n.cmd.Process.Pid)
	}
}

// DMN-4, DMN-8: stop --hold keeps the daemon up and stopped, survives a
// relaunch, and start lifts it.
func TestDMN4StopHoldSurvivesRelaunch(t *testing.T) {
	n := newNode(t)
	n.start("running")
	n.mustCLI("stop", "--hold")
	n.waitState("stopped")
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d after a clean drain", code)
	}
	if _, err := os.Stat(filepath.Join(n.data(), "control", "hold")); err != nil {
		t.Fatalf("hold marker: %v", err)
	}
	n.start("stopped")
	n.mustCLI("start")
	n.waitState("running")
}

// DMN-14: reinit is refused while running and when the epoch moved, and it
// moves the journal to the attic, never deleting it.
func TestDMN14Reinit(t *testing.T) {
	n := newNode(t)
	n.start("running")
	c, err := n.client()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	ep, _ := c.Epoch(ctx, control.EpochArgs{What: "journal"})
	if ep.Allowed {
		t.Fatal("reinit allowed while running")
	}
	_, err = c.Reinit(ctx, control.ReinitArgs{What: "journal", Epoch: ep.Epoch})
	if err == nil {
		t.Fatal("reinit accepted while running")
	}
	// DMN-6: the lifecycle's step.Refuse reaches the client as a refused
	// error naming state, event and reason.
	var refused *control.Error
	want := map[string]string{"state": "running", "event": fmt.Sprintf("reinit(journal, epoch %d)", ep.Epoch),
		"reason": "reinit is allowed only while stopped or failed"}
	if !errors.As(err, &refused) || refused.Code != control.CodeRefused || !reflect.DeepEqual(refused.Details, want) {
		t.Fatalf("refusal %#v, want code %s with details %v", err, control.CodeRefused, want)
	}
	n.mustCLI("stop")
	n.waitState("stopped")
	old, _ := c.Epoch(ctx, control.EpochArgs{What: "journal"})
	n.mustCLI("start")
	n.waitState("running")
	n.mustCLI("stop")
	n.waitState("stopped")
	if _, err := c.Reinit(ctx, control.ReinitArgs{What: "journal", Epoch: old.Epoch}); err == nil {
		t.Fatal("reinit accepted with an epoch that moved")
	}
	out := n.mustCLI("reinit", "journal", "--yes")
	moved, _ := filepath.Glob(filepath.Join(n.data(), "attic", "*", "journal"))
	if len(moved) != 1 {
		t.Fatalf("journal not in the attic (%v): %s", moved, out)
	}
	if entries, err := os.ReadDir(moved[0]); err != nil || len(entries) == 0 {
		t.Fatalf("attic journal empty: %v", err)
	}
	n.mustCLI("start")
	n.waitState("running")

	// reinit identity keeps the old identity in the attic; the next boot
	// records a new one (DMN-5, DMN-14).
	st, _ := n.status()
	oldID := st.Daemon.Node.ID
	n.mustCLI("stop")
	n.waitState("stopped")
	n.mustCLI("reinit", "identity", "--yes")
	kept, _ := filepath.Glob(filepath.Join(n.data(), "attic", "*", "identity.json"))
	if len(kept) != 1 {
		t.Fatalf("identity not kept in the attic: %v", kept)
	}
	if b, _ := os.ReadFile(kept[0]); !strings.Contains(string(b), oldID) {
		t.Fatalf("attic identity %s does not hold %s", b, oldID)
	}
	n.mustCLI("start")
	n.waitState("running")
	if st, _ := n.status(); st.Daemon.Node.ID == oldID || st.Daemon.Node.ID == "" {
		t.Fatalf("node id %q after reinit identity, was %q", st.Daemon.Node.ID, oldID)
	}
}

// DMN-11, SEC-4: malformed, oversized and half-written requests get clear
// errors and the daemon keeps serving.
func TestDMN11BadRequestsKeepServing(t *testing.T) {
	n := newNode(t)
	n.start("running")
	conn, err := net.Dial("unix", n.socket())
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	_, _ = conn.Write([]byte("this is not json\n"))
	line, _ := r.ReadString('\n')
	if !strings.Contains(line, "bad_request") {
		t.Fatalf("malformed: %q", line)
	}
	_, _ = conn.Write([]byte(`{"id":1,"op":"status"}` + "\n"))
	if line, _ = r.ReadString('\n'); !strings.Contains(line, `"id":1`) {
		t.Fatalf("after a malformed line the connection stopped working: %q", line)
	}
	conn.Close()

	big, _ := net.Dial("unix", n.socket())
	_, _ = big.Write([]byte(`{"id":2,"op":"status","args":{"stack":"` + strings.Repeat("x", 2<<20) + "\"}}\n"))
	if line, _ := bufio.NewReader(big).ReadString('\n'); !strings.Contains(line, "too_large") {
		t.Fatalf("oversized: %q", line)
	}
	big.Close()

	half, _ := net.Dial("unix", n.socket())
	_, _ = half.Write([]byte(`{"id":3,"op":"stop"`))
	half.Close()
	time.Sleep(100 * time.Millisecond)
	st, err := n.status()
	if err != nil || st.Daemon.Lifecycle.Name != "running" {
		t.Fatalf("after a half-written stop: %v %s", err, st.Daemon.Lifecycle.Name)
	}
}

// DMN-16: a config edit adds, removes and changes stacks while running,
// without restarting services that did not change; a truncated write does
// not take the daemon down.
func TestDMN16HotReload(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	a := n.writeFile("a.yaml", webStack("a", "v1", 1, ""))
	b := n.writeFile("b.yaml", webStack("b", "v1", 1, ""))
	n.writeConfig(a, b)
	n.start("running")
	n.eventually("a and b converged", 60*time.Second, func() bool {
		return converged(n.service("a", "web")) && converged(n.service("b", "web"))
	})
	idle := instances(n.service("a", "idle"))
	c := n.writeFile("c.yaml", webStack("c", "v1", 1, ""))
	n.writeFile("a.yaml", webStack("a", "v2", 1, ""))
	n.writeConfig(a, c)
	n.eventually("c added, b removed, a changed", 60*time.Second, func() bool {
		st, err := n.status()
		if err != nil {
			return false
		}
		var hasB bool
		for _, s := range st.Services {
			hasB = hasB || s.Stack == "b"
		}
		wa := n.service("a", "web")
		return !hasB && converged(n.service("c", "web")) && converged(wa) && wa.Deployment == "2"
	})
	if got := instances(n.service("a", "idle")); !equalStarts(got, idle) {
		t.Errorf("unchanged service a/idle restarted: %v, was %v", got, idle)
	}

	if err := os.WriteFile(n.config, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	st, err := n.status()
	if err != nil || st.Daemon.Lifecycle.Name != "running" {
		t.Fatalf("after a truncated config: %v %s", err, st.Daemon.Lifecycle.Name)
	}
	out := n.mustCLI("events")
	if !strings.Contains(out, "config.rejected") {
		t.Errorf("no config.rejected event:\n%s", out)
	}
	n.writeConfig(a, c)
}

func equalStarts(a, b map[string]time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !b[k].Equal(v) {
			return false
		}
	}
	return true
}

func itoa(i int) string { return strconv.Itoa(i) }
