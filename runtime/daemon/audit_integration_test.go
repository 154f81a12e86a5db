package daemon_test

import (
	"encoding/json"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

func auditStack(version string) string {
	return fmt.Sprintf(`name: aud
services:
  api:
    command: ["/bin/sh", "-c", "exec sleep 100000"]
    env: {VERSION: %q}
    stop_grace_period: 1s
`, version)
}

// history runs `engenho history --json` and parses it.
func (n *node) history(args ...string) []messages.AuditEntry {
	n.t.Helper()
	out := n.mustCLI(append([]string{"--json", "history"}, args...)...)
	var res control.HistoryResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		n.t.Fatalf("history --json does not parse: %v\n%s", err, out)
	}
	return res.Entries
}

// Issue 17 deploy audit, SVC-5 deploy records, DMN-11 peer credentials:
// apply, a refused apply, scale, redeploy, rollback, service stop and
// start and remove through the CLI (a subprocess: its socket peer is this
// test's uid) are each recorded with who, the deployments from and to,
// the revisions, the outcome and the message; `engenho history` shows
// them (table and --json) and a daemon restart keeps them; the events the
// requests cause carry the actor.
func TestIssue17DeployAuditThroughTheDaemon(t *testing.T) {
	n := newNode(t)
	n.start("running")
	uid := uint32(syscall.Getuid())
	name := "unknown"
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		name = u.Username
	}
	by := messages.AuditBy{UID: uid, User: name}

	v1 := n.writeFile("aud.yaml", auditStack("v1"))
	n.mustCLI("apply", v1)
	bad := n.writeFile("aud-bad.yaml", "name: aud\nservices:\n  api:\n    bogus_key: 1\n")
	if out, code := n.cli("apply", bad); code == 0 {
		t.Fatalf("a bad file applied: %s", out)
	}
	n.mustCLI("apply", n.writeFile("aud.yaml", auditStack("v2")))
	n.mustCLI("scale", "aud/api", "2")
	n.mustCLI("redeploy", "aud/api")
	n.mustCLI("rollback", "aud")
	n.mustCLI("service", "stop", "aud/api")
	n.mustCLI("service", "start", "aud/api")
	if out, code := n.cli("scale", "aud/nope", "2"); code == 0 {
		t.Fatalf("scale of an unknown service: %s", out)
	}

	want := []struct {
		op, service string
		from, to    uint64
		outcome     messages.AuditOutcome
		message     string // a piece of it
	}{
		{"apply", "", 0, 1, messages.AuditOK, ""},
		{"apply", "", 1, 1, messages.AuditRefused, "bogus_key"},
		{"apply", "", 1, 2, messages.AuditOK, ""},
		{"scale", "api", 2, 2, messages.AuditOK, "replicas 1 -> 2"},
		{"redeploy", "api", 2, 3, messages.AuditOK, ""},
		{"rollback", "", 3, 2, messages.AuditOK, ""},
		{"service-stop", "api", 2, 2, messages.AuditOK, ""},
		{"service-start", "api", 2, 2, messages.AuditOK, ""},
		{"scale", "nope", 2, 2, messages.AuditRefused, "unknown service"},
	}
	check := func(when string, got []messages.AuditEntry) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries, want %d: %+v", when, len(got), len(want), got)
		}
		for i, w := range want {
			e := got[i]
			if e.Op != w.op || e.Stack != "aud" || e.Service != w.service || e.FromDeployment != w.from || e.ToDeployment != w.to ||
				e.Outcome != w.outcome || !strings.Contains(e.Message, w.message) || e.By != by || e.UnixMs == 0 {
				t.Errorf("%s: entry %d = %+v, want %+v by %v", when, i, e, w, by)
			}
		}
		if a, r := got[0], got[4]; a.ToRevisions["api"] == "" || len(a.Plan) != 1 || !strings.HasPrefix(a.Plan[0], "api: create") ||
			r.FromRevisions["api"] == r.ToRevisions["api"] {
			t.Errorf("%s: revisions or plan missing: apply %+v, redeploy %+v", when, a, r)
		}
	}
	check("history", n.history())
	if got := n.history("aud", "-n", "2"); len(got) != 2 || got[1].Op != "scale" || got[0].Op != "service-start" {
		t.Errorf("history aud -n 2: %+v", got)
	}
	table := n.mustCLI("history", "aud")
	if !strings.Contains(table, "FROM->TO") || !strings.Contains(table, by.String()) || !strings.Contains(table, "refused") {
		t.Errorf("history table:\n%s", table)
	}

	// The events the requests caused name who asked.
	n.eventually("events carry the actor", 30*time.Second, func() bool {
		out, _ := n.cli("--json", "events", "-n", "0")
		kinds := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var ev messages.Event
			if json.Unmarshal([]byte(l), &ev) == nil && ev.Stack == "aud" && ev.By == by.String() {
				kinds[ev.Kind] = true
			}
		}
		return kinds[messages.KindOverrideSet] && kinds[messages.KindServiceStopped] && kinds[messages.KindServiceStarted] &&
			kinds[messages.KindRolloutStarted]
	})

	// A restart keeps the history; remove is recorded after it.
	if code := n.stop(); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
	n.start("running")
	check("after a restart", n.history())
	n.mustCLI("remove", "aud")
	got := n.history("aud", "-n", "1")
	if len(got) != 1 || got[0].Op != "remove" || got[0].Outcome != messages.AuditOK || got[0].FromDeployment != 2 || got[0].ToDeployment != 4 || got[0].By != by {
		t.Errorf("remove: %+v", got)
	}
}

// Issue 17 deploy audit: an apply refused because its file names no
// valid stack is still recorded, with no stack and the error that names
// the file; `history` (all stacks) shows it as "-", `history STACK` does
// not. A file that does not parse at all takes its stack name from its
// file name, as a good one would (Compose's project name), and is
// recorded under it.
func TestIssue17RefusedApplyWithNoStackIsAudited(t *testing.T) {
	n := newNode(t)
	n.start("running")
	broken := n.writeFile("broken.yaml", "services: [\n")
	badName := n.writeFile("bad-name.yaml", "name: Bad_Name\nservices:\n  api:\n    command: [\"/bin/true\"]\n")
	if out, code := n.cli("apply", broken, badName); code == 0 {
		t.Fatalf("broken files applied: %s", out)
	}
	got := n.history()
	if len(got) != 2 {
		t.Fatalf("history: %d entries, want 2: %+v", len(got), got)
	}
	for i, stack := range []string{"broken", ""} {
		e := got[i]
		if e.Op != messages.AuditApply || e.Stack != stack || e.Outcome != messages.AuditRefused ||
			!strings.Contains(e.Message, "bad-name.yaml:1: name: invalid stack name") || e.By.User == "" {
			t.Errorf("entry %d = %+v, want a refused apply of stack %q naming bad-name.yaml", i, e, stack)
		}
	}
	if table := n.mustCLI("history"); !strings.Contains(table, " - ") || !strings.Contains(table, "refused") {
		t.Errorf("history table does not show the stack-less refusal as '-':\n%s", table)
	}
	if got := n.history("broken"); len(got) != 1 || got[0].Stack != "broken" {
		t.Errorf("history broken: %+v", got)
	}
}
