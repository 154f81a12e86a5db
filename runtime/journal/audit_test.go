package journal

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/engenho/engenho/messages"
)

var root = messages.AuditBy{UID: 0, User: "root"}

func audit(op string) *messages.AuditEntry {
	return &messages.AuditEntry{Op: op, By: root}
}

// Issue 17 deploy audit, SVC-5 deploy records: an entry written with a
// change holds who, when, the deployments and revisions before and after
// and outcome ok; a refused request is recorded on its own; entries come
// back newest last, per stack or all, and survive a reopen with their
// numbers going on.
func TestIssue17DeployAuditRoundTrip(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), nil)
	d1 := dep(`{"v":1}`, map[string]string{"api": "r1"})
	must(j.ChangeStack("web", StackChange{Deploy: &d1, Audit: audit(messages.AuditApply)}))
	d2 := dep(`{"v":2}`, map[string]string{"api": "r2"})
	a := audit(messages.AuditApply)
	a.Plan = []string{"api: update r1 -> r2"}
	must(j.ChangeStack("web", StackChange{Deploy: &d2, Audit: a}))
	must(j.RecordAudit(messages.AuditEntry{Op: messages.AuditApply, Stack: "db", By: messages.AuditBy{UID: 1000},
		Outcome: messages.AuditRefused, Message: "db.yaml:3: services.x.image: required"}))
	noErr(t, j.StopServiceAudited("web", "api", nil, audit(messages.AuditServiceStop)))
	j = reopen(t, j)
	must(j.ChangeStack("web", StackChange{Rollback: true, Audit: audit(messages.AuditRollback)}))

	all := must(j.History("", 0))
	want := []struct {
		seq      uint64
		op       string
		stack    string
		from, to uint64
		outcome  messages.AuditOutcome
	}{
		{1, "apply", "web", 0, 1, messages.AuditOK},
		{2, "apply", "web", 1, 2, messages.AuditOK},
		{3, "apply", "db", 0, 0, messages.AuditRefused},
		{4, "service-stop", "web", 2, 2, messages.AuditOK},
		{5, "rollback", "web", 2, 1, messages.AuditOK},
	}
	if len(all) != len(want) {
		t.Fatalf("history: %d entries, want %d: %+v", len(all), len(want), all)
	}
	for i, w := range want {
		e := all[i]
		if e.Seq != w.seq || e.Op != w.op || e.Stack != w.stack || e.FromDeployment != w.from || e.ToDeployment != w.to || e.Outcome != w.outcome {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
		if e.UnixMs != clk.Now().UnixMilli() {
			t.Errorf("entry %d: unix_ms %d, want the clock's %d", i, e.UnixMs, clk.Now().UnixMilli())
		}
	}
	if e := all[1]; e.FromRevisions["api"] != "r1" || e.ToRevisions["api"] != "r2" || e.By != root || len(e.Plan) != 1 {
		t.Errorf("apply 2: revisions, who or plan lost: %+v", e)
	}
	if e := all[2]; e.By.User != "unknown" || !strings.Contains(e.Message, "image: required") {
		t.Errorf("refused apply: an unknown user name is \"unknown\", the message kept: %+v", e)
	}
	if e := all[3]; e.Service != "" || e.ToRevisions["api"] != "r2" {
		t.Errorf("service stop keeps the deployment: %+v", e)
	}
	web := must(j.History("web", 2))
	if len(web) != 2 || web[0].Seq != 4 || web[1].Seq != 5 {
		t.Errorf("History(web, 2) is the newest two of web, newest last: %+v", web)
	}
}

// Issue 17 deploy audit: a change the journal refuses writes no entry (the
// transaction is the change's), and a bad entry refuses the change, so a
// deployment is never recorded without its entry.
func TestIssue17AuditSharesTheChangesTransaction(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	d := dep(`{"v":1}`, map[string]string{"api": "r1"})
	if _, err := j.ChangeStack("web", StackChange{Rollback: true, Audit: audit(messages.AuditRollback)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rollback of an unknown stack: %v", err)
	}
	bad := &messages.AuditEntry{Op: messages.AuditApply, Outcome: "maybe"}
	if _, err := j.ChangeStack("web", StackChange{Deploy: &d, Audit: bad}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad outcome: %v", err)
	}
	if _, found, _ := j.Stack("web"); found {
		t.Fatal("a change with a bad audit entry was recorded")
	}
	if h := must(j.History("", 0)); len(h) != 0 {
		t.Fatalf("entries of changes that did not happen: %+v", h)
	}
}

// Issue 17 deploy audit: the log keeps the newest Retention.MaxAudit
// entries; numbering goes on past the dropped ones and across a reopen;
// a long message is cut; an entry reads back as the JSON it was.
func TestIssue17AuditRetention(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), func(o *Options) { o.Retention.MaxAudit = 3 })
	for range 5 {
		must(j.RecordAudit(messages.AuditEntry{Op: "scale", Stack: "web", Service: "api", Outcome: messages.AuditOK, By: root}))
	}
	h := must(j.History("", 0))
	if len(h) != 3 || h[0].Seq != 3 || h[2].Seq != 5 {
		t.Fatalf("after 5 writes with MaxAudit 3: %+v", h)
	}
	dir := j.Dir()
	noErr(t, j.Close())
	j, _ = openTest(t, dir, func(o *Options) { o.Retention.MaxAudit = 3 })
	seq := must(j.RecordAudit(messages.AuditEntry{Op: "scale", Stack: "web", Outcome: messages.AuditFailed, By: root,
		Message: strings.Repeat("x", 3*maxAuditMessage)}))
	h = must(j.History("", 0))
	if seq != 6 || len(h) != 3 || h[0].Seq != 4 || len(h[2].Message) > maxAuditMessage || !strings.HasSuffix(h[2].Message, "...") {
		t.Fatalf("after a reopen: seq %d, %+v", seq, h)
	}
	b, err := json.Marshal(h[2])
	noErr(t, err)
	var back messages.AuditEntry
	noErr(t, json.Unmarshal(b, &back))
	if back.Seq != 6 || back.Outcome != messages.AuditFailed || back.By != root {
		t.Fatalf("JSON round trip: %s", b)
	}
}

// Issue 17 deploy audit, SVC-20: an event carries who caused it (By) and
// keeps it through the log; a record written before By existed reads
// back with By empty, and an event without By encodes as before.
func TestIssue17EventByKeepsOldRecordsReadable(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	must(j.Append(messages.Event{Kind: messages.KindDeploySucceeded, Stack: "web", Message: "deployed", By: "uid 0 (root)"}))
	got := must(j.EventsAfter(0, 0))
	if len(got) != 1 || got[0].By != "uid 0 (root)" {
		t.Fatalf("event by: %+v", got)
	}
	var old messages.Event
	noErr(t, json.Unmarshal([]byte(`{"seq":7,"unix_ms":1,"level":"info","kind":"deploy.succeeded","message":"m"}`), &old))
	if old.Seq != 7 || old.By != "" {
		t.Fatalf("old record: %+v", old)
	}
	b, err := json.Marshal(messages.Event{Kind: "k", Message: "m"})
	noErr(t, err)
	if strings.Contains(string(b), `"by"`) {
		t.Fatalf("an event without By encodes a by field: %s", b)
	}
}
