package daemon

import (
	"reflect"
	"strings"
	"testing"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/runtime/journal"
)

const webV1 = `name: web
services:
  api:
    command: ["/bin/sleep", "1000"]
    deploy: {replicas: 2}
  worker:
    command: ["/bin/sleep", "2000"]
`

// SVC-17: remove, rollback and redeploy return what they did: the
// deployment they recorded and every service's change with the journal's
// revisions (a redeploy's suffix included), never an empty list when
// something changed. A second remove says the stack is already going.
func TestSVC17RemoveRollbackRedeploySayWhatTheyDid(t *testing.T) {
	j, err := journal.Open(journal.Options{Dir: t.TempDir(), NoSync: true, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	d := NewDeployer(j, nil, testKey)
	record := func(src string) map[string]string { return recordStack(t, d, src) }
	webV2 := `name: web
services:
  api:
    command: ["/bin/sleep", "1001"]
    deploy: {replicas: 2}
  worker:
    command: ["/bin/sleep", "2000"]
`
	v1, v2 := record(webV1), record(webV2)
	r1, r2 := v1["api"], v2["api"]
	worker := stackfile.Change{Service: "worker", Action: stackfile.ActionUnchanged, FromReplicas: 1, ToReplicas: 1}
	check := func(what string, got Changed, err error, want Changed) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i := range got.Changes {
			if got.Changes[i].Action == stackfile.ActionUnchanged {
				got.Changes[i].FromRevision, got.Changes[i].ToRevision = "", ""
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	update := func(from, to string) stackfile.Change {
		return stackfile.Change{Service: "api", Action: stackfile.ActionUpdate, FromRevision: from, ToRevision: to, FromReplicas: 2, ToReplicas: 2, Fields: []string{"command"}}
	}

	rb, err := d.Rollback("web", journal.Who{})
	check("rollback", rb.Changed, err, Changed{Deployment: 1, Changes: []stackfile.Change{update(r2, r1), worker}})
	rb, err = d.Rollback("web", journal.Who{})
	check("second rollback", rb.Changed, err, Changed{Deployment: 2, Changes: []stackfile.Change{update(r1, r2), worker}})

	ch, err := d.Redeploy("web", "api", testWho)
	redeploy := stackfile.Change{Service: "api", Action: stackfile.ActionUpdate, FromRevision: r2, ToRevision: r2 + "-r1", FromReplicas: 2, ToReplicas: 2}
	check("redeploy", ch, err, Changed{Deployment: 3, Changes: []stackfile.Change{redeploy, worker}})

	gone := []stackfile.Change{
		{Service: "api", Action: stackfile.ActionRemove, FromRevision: r2 + "-r1", FromReplicas: 2},
		{Service: "worker", Action: stackfile.ActionRemove, FromRevision: v1["worker"], FromReplicas: 1},
	}
	ch, err = d.Remove("web", testWho)
	check("remove", ch, err, Changed{Deployment: 4, Changes: gone})
	ch, err = d.Remove("web", testWho)
	check("second remove", ch, err, Changed{Deployment: 4, Changes: gone, Already: true})
}

// SVC-17, SVC-23: what remove, rollback and redeploy say they did is what
// runs: a scale override shows in their replica counts (a rollback keeps
// it); a rollback away from the file's deployment says so with its
// override; a redeploy keeps the stack file as the deployment's source, so
// a reload of that file does not take it for another stack's.
func TestSVC17ChangesCountTheOverrides(t *testing.T) {
	j, err := journal.Open(journal.Options{Dir: t.TempDir(), NoSync: true, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	d := NewDeployer(j, nil, testKey)
	const file = "/etc/engenho/web.yaml"
	for _, src := range []string{webV1, strings.Replace(webV1, `"1000"]`, `"1001"]`, 1)} {
		st, err := stackfile.Parse("web.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		revs := map[string]string{}
		for name, svc := range st.Services {
			revs[name] = svc.Revision()
		}
		if _, err := d.recordDeployment(st, revs, file, nil); err != nil {
			t.Fatal(err)
		}
	}
	if sc, err := d.Scale("web", "api", 5, journal.Who{}); err != nil || sc.Override == nil {
		t.Fatalf("scale: %+v %v", sc, err)
	}
	replicas := func(what string, changes []stackfile.Change, from, to int) {
		t.Helper()
		for _, c := range changes {
			if c.Service == "api" && (c.FromReplicas != from || c.ToReplicas != to) {
				t.Errorf("%s: api %+v, want replicas %d -> %d", what, c, from, to)
			}
		}
	}
	rb, err := d.Rollback("web", journal.Who{})
	if err != nil || rb.Override == nil || rb.To != 1 || rb.Deployment != 1 || len(rb.Changes) != 2 || rb.Changes[0].Action != stackfile.ActionUpdate {
		t.Fatalf("rollback: %+v %v", rb, err)
	}
	replicas("rollback", rb.Changes, 5, 5)
	ch, err := d.Redeploy("web", "api", testWho)
	if err != nil || ch.Changes[0].Action != stackfile.ActionUpdate {
		t.Fatalf("redeploy: %+v %v", ch, err)
	}
	replicas("redeploy", ch.Changes, 5, 5)
	if cur, _, _ := j.Stack("web"); cur.Current.Source != file {
		t.Errorf("redeploy recorded source %q, want the stack file %q", cur.Current.Source, file)
	}
	ch, err = d.Remove("web", testWho)
	if err != nil || len(ch.Changes) != 2 || ch.Changes[0].Action != stackfile.ActionRemove {
		t.Fatalf("remove: %+v %v", ch, err)
	}
	replicas("remove", ch.Changes, 5, 0)
}

// Compose's depends_on.X.restart: true (issue 15): a service restarts
// when a service it depends on so moves to a new revision, by an update
// or a redeploy, transitively; a dependency without restart, a new
// service, or a dependent that changed itself add nothing.
func TestRestartDependents(t *testing.T) {
	st, err := stackfile.Parse("s.yaml", []byte(`name: s
services:
  db: {command: [db]}
  api:
    command: [api]
    depends_on: {db: {condition: service_started, restart: true}}
  web:
    command: [web]
    depends_on: {api: {condition: service_started, restart: true}}
  batch:
    command: [batch]
    depends_on: [db]
  cache: {command: [cache]}
`))
	if err != nil {
		t.Fatal(err)
	}
	prev := map[string]string{"db": "d1", "api": "a1", "web": "w1-r2", "batch": "b1", "cache": "c1"}
	revs := map[string]string{"db": "d2", "api": "a1", "web": "w1-r2", "batch": "b1", "cache": "c1"}
	got := restartDependents(st, prev, revs)
	if strings.Join(got, ",") != "api,web" {
		t.Errorf("restarted %v, want api,web", got)
	}
	want := map[string]string{"db": "d2", "api": "a1-r1", "web": "w1-r3", "batch": "b1", "cache": "c1"}
	if !reflect.DeepEqual(revs, want) {
		t.Errorf("revisions %v, want %v", revs, want)
	}

	revs = map[string]string{"db": "d1", "api": "a2", "web": "w1-r2", "batch": "b1", "cache": "c2"}
	if got := restartDependents(st, prev, revs); strings.Join(got, ",") != "web" || revs["api"] != "a2" {
		t.Errorf("api changed itself: restarted %v, revisions %v", got, revs)
	}
	revs = map[string]string{"db": "d2", "api": "a1", "web": "w1-r2", "batch": "b1", "cache": "c1"}
	if got := restartDependents(st, map[string]string{"db": "d1"}, revs); len(got) != 0 {
		t.Errorf("services new to the stack were restarted: %v", got)
	}
}

// Through Apply and Redeploy: the dependent's new revision is recorded in
// the same deployment, and apply says so in a note.
func TestRestartDependentsRecorded(t *testing.T) {
	j, err := journal.Open(journal.Options{Dir: t.TempDir(), NoSync: true, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	d := NewDeployer(j, testNode{fake.New(fake.Options{})}, testKey)
	src := func(dbCmd string) *stackfile.Stack {
		st, err := stackfile.Parse("s.yaml", []byte(`name: s
services:
  db: {command: [`+dbCmd+`], driver: fake}
  api:
    command: [api]
    driver: fake
    depends_on: {db: {condition: service_started, restart: true}}
`))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	revision := func(svc string) string {
		st, _, err := j.Stack("s")
		if err != nil {
			t.Fatal(err)
		}
		return st.Current.Revisions[svc]
	}
	if _, err := d.Apply(t.Context(), src("db1"), "test", false, nil); err != nil {
		t.Fatal(err)
	}
	api1 := revision("api")
	applied, err := d.Apply(t.Context(), src("db2"), "test", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if api2 := revision("api"); api2 != api1+"-r1" {
		t.Errorf("api after db's update: %s, want %s-r1", api2, api1)
	}
	if !strings.Contains(strings.Join(applied.Notes, "\n"), "api: restarted with what it depends on") {
		t.Errorf("notes: %q", applied.Notes)
	}
	if _, err := d.Redeploy("s", "db", testWho); err != nil {
		t.Fatal(err)
	}
	if api3 := revision("api"); api3 != api1+"-r2" {
		t.Errorf("api after db's redeploy: %s, want %s-r2", api3, api1)
	}
}

// SVC-4, SVC-17, issue 18 (found by the chaos campaign): an apply names
// the revisions the services run. A redeployed service runs its file's
// revision with a -rN suffix, kept while its definition is unchanged, so
// an apply of the same file says "unchanged" at that revision, and an
// update says it comes from it; before, the plan named the bare file
// revision nothing ran.
func TestSVC4ApplyNamesTheRunningRevision(t *testing.T) {
	j, err := journal.Open(journal.Options{Dir: t.TempDir(), NoSync: true, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	d := NewDeployer(j, testNode{fake.New(fake.Options{})}, testKey)
	parse := func(src string) *stackfile.Stack {
		t.Helper()
		src = strings.ReplaceAll(src, `"]
`, `"]
    driver: fake
`)
		st, err := stackfile.Parse("web.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if _, err := d.Apply(t.Context(), parse(webV1), "web.yaml", false, nil); err != nil {
		t.Fatal(err)
	}
	ch, err := d.Redeploy("web", "api", testWho)
	if err != nil {
		t.Fatal(err)
	}
	redeployed := ch.Changes[0].ToRevision
	byName := func(a Applied) map[string]stackfile.Change {
		out := map[string]stackfile.Change{}
		for _, c := range a.Changes {
			out[c.Service] = c
		}
		return out
	}
	for _, dry := range []bool{true, false} {
		again, err := d.Apply(t.Context(), parse(webV1), "web.yaml", dry, nil)
		if err != nil {
			t.Fatal(err)
		}
		api := byName(again)["api"]
		if api.Action != stackfile.ActionUnchanged || api.FromRevision != redeployed || api.ToRevision != redeployed {
			t.Fatalf("dry run %v: the same file after a redeploy: %+v, want unchanged at %s", dry, api, redeployed)
		}
	}
	v2 := strings.Replace(webV1, `"2000"]`, `"2001"]`, 1) // worker changes; api does not
	next, err := d.Apply(t.Context(), parse(v2), "web.yaml", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if api := byName(next)["api"]; api.ToRevision != redeployed || api.FromRevision != redeployed {
		t.Fatalf("an apply that changes another service: api %+v, want it kept at %s", api, redeployed)
	}
}
