package daemon_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

const quickMonitor = `      update_config:
        monitor: 1s`

// reloadsSeen counts the daemon's log lines that say an apply of the stack
// file kept an override: each reload, reconfigure and boot that applied
// the file adds one. It is how the tests know the file was applied again,
// rather than hoping enough time went by.
func (n *node) reloadsSeen(note string) int { return strings.Count(n.log.String(), note) }

// reapplied waits until the stack file was applied once more than before.
func (n *node) reapplied(what, note string, before int) {
	n.t.Helper()
	n.eventually(what+": the stack file applied again", 60*time.Second, func() bool { return n.reloadsSeen(note) > before })
}

func overrideOf(s messages.ServiceStatus, field string) (messages.Override, bool) {
	for _, o := range s.Overrides {
		if o.Field == field {
			return o, true
		}
	}
	return messages.Override{}, false
}

// SVC-23 (new rule: an operator's command holds a value the stack file
// declares until the file changes that field; docs/services.md), SVC-17,
// DMN-9, DMN-16, REL-3: `engenho scale` of a service whose stack file the
// config lists survives SIGHUP, `engenho reconfigure`, a SIGKILL of the
// daemon and an edit of another field of the file, without a restart of a
// replica; it shows in status (table and --json) beside the file's count;
// run twice it changes nothing; an edit of deploy.replicas drops it with
// an override.dropped event.
func TestSVC23ScaleSurvivesReloadsRestartsAndEdits(t *testing.T) {
	n := newNode(t)
	file := n.writeFile("ov.yaml", webStack("ov", "v1", 1, quickMonitor))
	n.writeConfig(file)
	n.start("running")
	n.eventually("ov/web converged", 60*time.Second, func() bool { return converged(n.service("ov", "web")) })

	out := n.mustCLI("scale", "ov/web", "2")
	if !strings.Contains(out, "ov/web: 1 -> 2 replicas (the stack file says 1;") {
		t.Fatalf("scale said %q", out)
	}
	n.eventually("2 replicas", 60*time.Second, func() bool {
		s := n.service("ov", "web")
		return converged(s) && s.Desired == 2 && len(s.Replicas) == 2
	})
	s := n.service("ov", "web")
	o, ok := overrideOf(s, messages.OverrideReplicas)
	if !ok || o.Value != "2" || o.File != "1" || o.UID == nil || *o.UID != uint32(syscall.Getuid()) || o.Command != "engenho scale ov/web 2" {
		t.Fatalf("status --json overrides: %+v", s.Overrides)
	}
	if out, code := n.cli("status", "ov/typo"); code == 0 || !strings.Contains(out, `no service "typo"`) {
		t.Fatalf("status of a mistyped service: exit %d\n%s", code, out)
	}
	st := n.mustCLI("status", "ov/web")
	if !strings.Contains(st, "2 (file 1)") || !strings.Contains(st, "replicas 2 (file says 1; scaled by uid ") {
		t.Fatalf("status does not show the override:\n%s", st)
	}
	replicas := instances(s)
	if out := n.mustCLI("scale", "ov/web", "2"); !strings.Contains(out, "already 2 replicas (the stack file says 1; scaled by uid ") {
		t.Fatalf("scale run twice said %q", out)
	}

	const kept = "web: replicas 2 kept (the file says 1"
	holds := func(after string) {
		t.Helper()
		s := n.service("ov", "web")
		if o, ok := overrideOf(s, messages.OverrideReplicas); s.Desired != 2 || !ok || o.Value != "2" {
			t.Fatalf("after %s: desired %d, overrides %+v", after, s.Desired, s.Overrides)
		}
	}
	before := n.reloadsSeen(kept)
	if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	n.reapplied("SIGHUP", kept, before)
	holds("SIGHUP")

	before = n.reloadsSeen(kept)
	n.mustCLI("reconfigure")
	n.reapplied("reconfigure", kept, before)
	holds("reconfigure")

	n.kill()
	n.start("running")
	n.reapplied("restart after SIGKILL", kept, 0)
	n.eventually("converged after the restart", 60*time.Second, func() bool { return converged(n.service("ov", "web")) })
	holds("SIGKILL and restart")
	if got := instances(n.service("ov", "web")); !equalStarts(got, replicas) {
		t.Fatalf("replicas restarted: %v, were %v", got, replicas)
	}

	// An edit of another field: the new revision rolls out on 2 replicas.
	old := n.service("ov", "web").Revision
	n.writeFile("ov.yaml", webStack("ov", "v2", 1, quickMonitor))
	n.eventually("v2 rolled out on 2 replicas", 90*time.Second, func() bool {
		s := n.service("ov", "web")
		return converged(s) && s.Revision != old && len(s.Replicas) == 2 && s.Replicas[0].Revision == s.Revision && s.Replicas[1].Revision == s.Revision
	})
	holds("an edit of another field")

	// An edit of deploy.replicas: the file's new count wins, announced.
	n.writeFile("ov.yaml", webStack("ov", "v2", 3, quickMonitor))
	n.eventually("the file's 3 replicas", 60*time.Second, func() bool {
		s := n.service("ov", "web")
		return converged(s) && s.Desired == 3 && len(s.Overrides) == 0
	})
	ev := n.mustCLI("events")
	if !strings.Contains(ev, "override.dropped") || !strings.Contains(ev, "the stack file changed deploy.replicas from 1 to 3") {
		t.Fatalf("no override.dropped event:\n%s", ev)
	}
}

// SVC-23, SVC-17, DMN-9, DMN-16: `engenho rollback` of a stack whose file
// the config lists holds across SIGHUP and a SIGKILL of the daemon (the
// file was not changed, so it is not applied again), shows in status, and
// ends with an override.dropped event when the file is edited, which is
// then deployed. `engenho remove`, and an `engenho apply` of another
// definition, of that stack are refused with what to edit instead.
func TestSVC23RollbackSurvivesReloadAndRestart(t *testing.T) {
	n := newNode(t)
	file := n.writeFile("rb.yaml", webStack("rb", "v1", 1, quickMonitor))
	n.writeConfig(file)
	n.start("running")
	n.eventually("rb/web converged", 60*time.Second, func() bool { return converged(n.service("rb", "web")) })
	v1 := n.service("rb", "web").Revision
	n.writeFile("rb.yaml", webStack("rb", "v2", 1, quickMonitor))
	n.eventually("deployment 2 converged", 90*time.Second, func() bool {
		s := n.service("rb", "web")
		return converged(s) && s.Deployment == "2" && s.Revision != v1
	})

	out := n.mustCLI("rollback", "rb")
	if !strings.Contains(out, "rolling back stack rb to deployment 1:") || !strings.Contains(out, "\nweb      update ") ||
		!strings.Contains(out, "until the stack file changes") {
		t.Fatalf("rollback said %q", out)
	}
	back := func(after string) {
		t.Helper()
		n.eventually("back on deployment 1 after "+after, 90*time.Second, func() bool {
			s := n.service("rb", "web")
			o, ok := overrideOf(s, messages.OverrideDeployment)
			return converged(s) && s.Deployment == "1" && s.Revision == v1 && ok && o.Value == "1" && o.File == "2"
		})
	}
	back("the rollback")
	if st := n.mustCLI("status", "rb"); !strings.Contains(st, "deployment 1 (file says deployment 2; rolled back by uid ") {
		t.Fatalf("status does not show the rollback:\n%s", st)
	}

	const holds = "rollback to deployment 1 ("
	before := n.reloadsSeen(holds)
	if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	n.reapplied("SIGHUP", holds, before)
	back("SIGHUP")

	n.kill()
	n.start("running")
	n.reapplied("restart after SIGKILL", holds, 0)
	back("SIGKILL and restart")

	n.writeFile("rb.yaml", webStack("rb", "v3", 1, quickMonitor))
	n.eventually("the edited file deployed", 90*time.Second, func() bool {
		s := n.service("rb", "web")
		return converged(s) && s.Deployment == "3" && len(s.Overrides) == 0
	})
	if ev := n.mustCLI("events"); !strings.Contains(ev, "override.dropped") || !strings.Contains(ev, "rollback to deployment 1 dropped") {
		t.Fatalf("no override.dropped event:\n%s", ev)
	}

	// What would replace the whole declaration is refused up front,
	// saying what to edit instead; the file's own content is accepted.
	if out, code := n.cli("remove", "rb"); code != 1 || !strings.Contains(out, "is declared by "+file) || !strings.Contains(out, "Take the file out of `stacks`") {
		t.Fatalf("remove of a listed stack: exit %d, %q", code, out)
	}
	other := n.writeFile("other.yaml", webStack("rb", "v9", 1, quickMonitor))
	if out, code := n.cli("apply", other); code != 1 || !strings.Contains(out, "Edit that file instead") {
		t.Fatalf("apply over a listed stack: exit %d, %q", code, out)
	}
	if out := n.mustCLI("apply", other, "--dry-run"); !strings.Contains(out, "applying this would be refused") {
		t.Fatalf("dry run over a listed stack: %q", out)
	}
	n.mustCLI("apply", file, "--wait")
	if s := n.service("rb", "web"); s.Deployment != "3" {
		t.Fatalf("after the refused commands: deployment %s, want 3", s.Deployment)
	}
}
