package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/control/controltest"
)

var root0 = messages.AuditBy{UID: 0, User: "root"}

// Issue 17 deploy audit, DMN-11: engenho history [STACK] [-n N] sends the
// stack and limit and prints SEQ TIME WHO OP STACK/SERVICE FROM->TO
// OUTCOME MESSAGE, the message on one line; --json prints the entries as
// the daemon sent them.
func TestIssue17HistoryTableAndJSON(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()
	res := control.HistoryResult{Entries: []messages.AuditEntry{
		{Seq: 1, UnixMs: at, Op: "apply", Stack: "web", By: root0, ToDeployment: 1, ToRevisions: map[string]string{"api": "r1"}, Outcome: messages.AuditOK},
		{Seq: 2, UnixMs: at, Op: "apply", Stack: "web", By: messages.AuditBy{UID: 1000, User: "unknown"}, FromDeployment: 1, ToDeployment: 1,
			Outcome: messages.AuditRefused, Message: "web.yaml:3: services.api.image: required\nweb.yaml:9: services.db: unknown key"},
		{Seq: 3, UnixMs: at, Op: "scale", Stack: "web", Service: "api", By: root0, FromDeployment: 1, ToDeployment: 1, Outcome: messages.AuditOK, Message: "replicas 1 -> 3"},
	}}
	f := &controltest.Fake{HistoryResult: res}
	sock := daemonFake(t, f)

	out, errs, code := cli(t, sock, "", "history", "web", "-n", "5")
	if code != 0 {
		t.Fatalf("history: exit %d: %s", code, errs)
	}
	if got := f.Calls()[0].Args; !reflect.DeepEqual(got, control.HistoryArgs{Stack: "web", Limit: 5}) {
		t.Errorf("history sent %+v", got)
	}
	want := formatHistory(res.Entries, time.Local)
	same(t, "history table", out, want)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SEQ  TIME") || !strings.Contains(lines[0], "FROM->TO") {
		t.Fatalf("history table:\n%s", out)
	}
	for i, piece := range []string{"uid 0 (root) apply web ->1 ok -", "uid 1000 (unknown) apply web 1->1 refused web.yaml:3: services.api.image: required web.yaml:9",
		"scale web/api 1->1 ok replicas 1 -> 3"} {
		if !strings.Contains(strings.Join(strings.Fields(lines[i+1]), " "), piece) {
			t.Errorf("row %d %q lacks %q", i+1, lines[i+1], piece)
		}
	}

	out, errs, code = cli(t, sock, "", "--json", "history")
	if code != 0 {
		t.Fatalf("history --json: exit %d: %s", code, errs)
	}
	var back control.HistoryResult
	if err := json.Unmarshal([]byte(out), &back); err != nil || !reflect.DeepEqual(back, res) {
		t.Errorf("history --json: %v\n%s", err, out)
	}
	if got := f.Calls()[1].Args; !reflect.DeepEqual(got, control.HistoryArgs{Limit: 50}) {
		t.Errorf("history without a stack sent %+v", got)
	}
	if _, _, code := cli(t, sock, "", "history", "Web"); code != 2 {
		t.Errorf("a bad stack name is a usage error, got exit %d", code)
	}
}

// Issue 17 deploy audit, SVC-20: an event a request caused names who
// asked, after where it happened.
func TestIssue17EventLineNamesTheActor(t *testing.T) {
	e := messages.Event{Seq: 9, UnixMs: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli(), Level: messages.LevelInfo,
		Kind: messages.KindRolloutStarted, Stack: "web", Service: "api", By: "uid 0 (root)", Message: "rolling out"}
	same(t, "event with by", formatEvent(e, time.UTC), "#9 2025-03-01 12:00:00.000 info  rollout.started web/api by uid 0 (root): rolling out")
}

func TestIssue17HistoryEmpty(t *testing.T) {
	same(t, "no entries", formatHistory(nil, time.UTC), "no deployments recorded\n")
}
