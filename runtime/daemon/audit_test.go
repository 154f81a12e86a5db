package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
)

// testWho is the requester of deployer calls in unit tests.
var testWho = journal.Who{UID: 0, User: "root"}

// recordStack records the stack file src as d's next deployment and
// returns its services' revisions.
func recordStack(t *testing.T, d *Deployer, src string) map[string]string {
	t.Helper()
	st, err := stackfile.Parse("web.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	revs := map[string]string{}
	for name, svc := range st.Services {
		revs[name] = svc.Revision()
	}
	if _, err := d.recordDeployment(st, revs, "test", nil); err != nil {
		t.Fatal(err)
	}
	return revs
}

func auditDeployer(t *testing.T) (*Deployer, *journal.Journal) {
	t.Helper()
	j, err := journal.Open(journal.Options{Dir: t.TempDir(), NoSync: true, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	d := NewDeployer(j, nil, testKey)
	d.actors = newActors()
	return d, j
}

// Issue 17 deploy audit, SVC-5: a rollback without a previous deployment
// and a redeploy of an unknown service are recorded as refused with the
// error, a recorded redeploy as ok with its deployments; who asked is
// kept (an unknown user name is "unknown"); the events of the stack then
// carry the actor, also for a deployer started later over the same
// journal (a daemon restart).
func TestIssue17DeployerAuditsRefusalsAndSeedsTheActor(t *testing.T) {
	d, j := auditDeployer(t)
	recordStack(t, d, webV1)
	anon := journal.Who{UID: 4321}
	if _, err := d.Rollback("web", anon); !errors.Is(err, journal.ErrNoPrevious) {
		t.Fatalf("rollback with no previous: %v", err)
	}
	if _, err := d.Redeploy("web", "nope", testWho); !errors.Is(err, ErrUnknownService) {
		t.Fatalf("redeploy of an unknown service: %v", err)
	}
	if _, err := d.Redeploy("web", "api", testWho); err != nil {
		t.Fatal(err)
	}
	h, err := j.History("web", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		op       string
		by       messages.AuditBy
		from, to uint64
		outcome  messages.AuditOutcome
		message  string
	}{
		{messages.AuditRollback, messages.AuditBy{UID: 4321, User: "unknown"}, 1, 1, messages.AuditRefused, "no previous"},
		{messages.AuditRedeploy, messages.AuditBy{User: "root"}, 1, 1, messages.AuditRefused, "unknown service"},
		{messages.AuditRedeploy, messages.AuditBy{User: "root"}, 1, 2, messages.AuditOK, ""},
	}
	if len(h) != len(want) {
		t.Fatalf("history: %+v", h)
	}
	for i, w := range want {
		e := h[i]
		if e.Op != w.op || e.By != w.by || e.FromDeployment != w.from || e.ToDeployment != w.to || e.Outcome != w.outcome || !strings.Contains(e.Message, w.message) {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
	}
	ev := messages.Event{Kind: messages.KindRolloutStarted, Stack: "web"}
	d.actors.stamp(&ev)
	crash := messages.Event{Kind: messages.KindReplicaRestarted, Stack: "web"}
	d.actors.stamp(&crash)
	if ev.By != "uid 0 (root)" || crash.By != "" {
		t.Errorf("a rollout event carries the actor, a crash restart none: %q %q", ev.By, crash.By)
	}

	later := NewDeployer(j, nil, testKey)
	later.actors = newActors()
	later.seedActors()
	ev = messages.Event{Kind: messages.KindDeploySucceeded, Stack: "web"}
	later.actors.stamp(&ev)
	if ev.By != "uid 0 (root)" {
		t.Errorf("after a restart the actor is taken from the audit log: %q", ev.By)
	}
}

// Issue 17 deploy audit: an apply's plan is kept one line per changed
// service; the first lines of a long refusal are kept.
func TestIssue17PlanLinesAndFirstLines(t *testing.T) {
	got := planLines([]stackfile.Change{
		{Service: "api", Action: stackfile.ActionUpdate, FromRevision: "a1", ToRevision: "b2", FromReplicas: 2, ToReplicas: 2, Fields: []string{"env.VERSION"}},
		{Service: "db", Action: stackfile.ActionUnchanged, FromRevision: "c", ToRevision: "c"},
		{Service: "new", Action: stackfile.ActionCreate, ToRevision: "d4", ToReplicas: 1},
		{Service: "w", Action: stackfile.ActionScale, FromRevision: "e", ToRevision: "e", FromReplicas: 1, ToReplicas: 3},
	})
	want := []string{"api: update a1 -> b2 (env.VERSION)", "new: create d4", "w: scale replicas 1 -> 3"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("plan lines %q, want %q", got, want)
	}
	long := strings.Repeat("line\n", 20) + "last"
	if got := firstLines(long, 3); got != "line\nline\nline\n(18 more lines)" {
		t.Errorf("firstLines: %q", got)
	}
}

// SUP-17: `service retry` names a service the stack has; a mistyped one is
// ErrUnknownService (not_found), not a backoff "cleared" that cleared
// nothing.
func TestServiceRetryOfAnUnknownServiceIsNotFound(t *testing.T) {
	d, _ := auditDeployer(t)
	recordStack(t, d, webV1)
	if err := d.Retry("web", "typo"); !errors.Is(err, ErrUnknownService) {
		t.Fatalf("retry of web/typo: %v, want ErrUnknownService", err)
	}
	if err := d.Retry("nope", "api"); !errors.Is(err, ErrUnknownStack) {
		t.Fatalf("retry of nope/api: %v, want ErrUnknownStack", err)
	}
	if err := d.Retry("web", "api"); err != nil {
		t.Fatalf("retry of web/api: %v", err)
	}
}
