package stackfile

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const planBase = `name: shop
services:
  web:
    command: ["/bin/web"]
    ports: ["8080:80"]
    deploy: {replicas: 2}
  api:
    command: ["/bin/api"]
    env: {PW: {value: old, secret: true}}
  worker:
    command: ["/bin/worker"]
  cron:
    command: ["/bin/cron"]
  db:
    command: ["/bin/db"]
`

// SVC-4: one change of every action, in a stable order (next's file
// order, then the removed services in current's order).
func TestPlanEveryActionSVC4(t *testing.T) {
	cur := mustParse(t, "shop.yaml", planBase)
	next := mustParse(t, "shop.yaml", `name: shop
services:
  new:
    command: ["/bin/new"]
    deploy: {replicas: 2}
  web:
    command: ["/bin/web", "-v"]
    ports: ["8080:80"]
    deploy: {replicas: 3}
  api:
    command: ["/bin/api"]
    env: {PW: {value: new, secret: true}}
  worker:
    command: ["/bin/worker"]
    deploy: {replicas: 4}
  cron:
    command: ["/bin/cron"]
    stop_grace_period: 1m
    deploy: {update_config: {order: start-first}}
`)
	// db is removed; its place in the order is after next's services.
	got := Plan(cur, next)
	type row struct {
		svc    string
		action Action
		from   int
		to     int
		fields []string
	}
	want := []row{
		{"new", ActionCreate, 0, 2, nil},
		{"web", ActionUpdate, 2, 3, []string{"command", "deploy.replicas"}},
		{"api", ActionUpdate, 1, 1, []string{"env.PW"}},
		{"worker", ActionScale, 1, 4, []string{"deploy.replicas"}},
		{"cron", ActionReconfigure, 1, 1, []string{"deploy.update_config.order", "stop_grace_period"}},
		{"db", ActionRemove, 1, 0, nil},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d changes: %v", len(got), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Service != w.svc || g.Action != w.action || g.FromReplicas != w.from || g.ToReplicas != w.to || !reflect.DeepEqual(g.Fields, w.fields) {
			t.Errorf("change %d: %+v, want %+v", i, g, w)
		}
	}
	// Revisions: create has only To, remove only From, update differs,
	// scale and reconfigure keep it.
	if got[0].FromRevision != "" || got[0].ToRevision != next.Services["new"].Revision() {
		t.Errorf("create revisions %+v", got[0])
	}
	if got[1].FromRevision == got[1].ToRevision {
		t.Error("update must change the revision")
	}
	if got[3].FromRevision != got[3].ToRevision || got[4].FromRevision != got[4].ToRevision {
		t.Error("scale and reconfigure keep the revision")
	}
	if got[5].ToRevision != "" || got[5].FromRevision != cur.Services["db"].Revision() {
		t.Errorf("remove revisions %+v", got[5])
	}
	// SEC-2: the rotated secret shows as a key, never a value.
	for _, text := range []string{got[2].String(), FormatPlan(got)} {
		if strings.Contains(text, "old") || strings.Contains(text, "new\t") {
			t.Errorf("plan shows a secret value: %s", text)
		}
	}
}

// SVC-4: the same file twice is unchanged everywhere; a nil current is
// all create; a nil next is all remove.
func TestPlanUnchangedCreateRemoveSVC4(t *testing.T) {
	a := mustParse(t, "shop.yaml", planBase)
	b := mustParse(t, "other/shop.yaml", planBase)
	for _, c := range Plan(a, b) {
		if c.Action != ActionUnchanged || c.Fields != nil || c.FromRevision != c.ToRevision {
			t.Errorf("%s: %+v, want unchanged", c.Service, c)
		}
	}
	for _, c := range Plan(nil, a) {
		if c.Action != ActionCreate {
			t.Errorf("from nothing: %+v", c)
		}
	}
	gone := Plan(a, nil)
	if len(gone) != 5 || gone[0].Service != "web" || gone[4].Service != "db" {
		t.Fatalf("remove order: %v", gone)
	}
	for _, c := range gone {
		if c.Action != ActionRemove {
			t.Errorf("to nothing: %+v", c)
		}
	}
	if len(Plan(nil, nil)) != 0 {
		t.Error("nothing to nothing is no change")
	}
}

// SVC-4: the dry-run table and the one-line form.
func TestPlanFormatSVC4(t *testing.T) {
	cur := mustParse(t, "s.yaml", "services:\n  web: {command: [a], deploy: {replicas: 2}}\n  old: {command: [o]}\n")
	next := mustParse(t, "s.yaml", "services:\n  web: {command: [b], deploy: {replicas: 3}}\n  new: {command: [n]}\n")
	changes := Plan(cur, next)
	web, nw, old := next.Services["web"].Revision(), next.Services["new"].Revision(), cur.Services["old"].Revision()
	prev := cur.Services["web"].Revision()
	row := func(svc, action, rev, replicas, changed string) string {
		return strings.TrimRight(fmt.Sprintf("%-7s  %-6s  %-28s  %-8s  %s", svc, action, rev, replicas, changed), " ")
	}
	want := strings.Join([]string{
		row("SERVICE", "ACTION", "REVISION", "REPLICAS", "CHANGED"),
		row("web", "update", prev+" -> "+web, "2 -> 3", "command, deploy.replicas"),
		row("new", "create", nw, "1", "-"),
		row("old", "remove", old, "1", "-"),
		"",
	}, "\n")
	if got := FormatPlan(changes); got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
	if got, want := changes[0].String(), "web: update "+prev+" -> "+web+", replicas 2 -> 3 (command, deploy.replicas)"; got != want {
		t.Fatalf("line %q, want %q", got, want)
	}
}

// SVC-4: Plan is deterministic: the same inputs give the same changes.
func TestPlanDeterministicSVC4(t *testing.T) {
	cur := mustParse(t, "shop.yaml", planBase)
	next := mustParse(t, "shop.yaml", strings.ReplaceAll(planBase, "/bin/", "/opt/"))
	first := Plan(cur, next)
	for range 20 {
		if !reflect.DeepEqual(Plan(cur, next), first) {
			t.Fatal("plan differs between runs")
		}
	}
}
