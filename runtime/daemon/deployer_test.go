package daemon

import (
	"reflect"
	"testing"

	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/stackfile"
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
	d := NewDeployer(j, nil)
	record := func(src string) map[string]string {
		t.Helper()
		st, err := stackfile.Parse("web.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		revs := map[string]string{}
		for name, svc := range st.Services {
			revs[name] = svc.Revision()
		}
		if _, err := d.record(st, revs, "test"); err != nil {
			t.Fatal(err)
		}
		return revs
	}
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

	ch, err := d.Rollback("web")
	check("rollback", ch, err, Changed{Deployment: 1, Changes: []stackfile.Change{update(r2, r1), worker}})
	ch, err = d.Rollback("web")
	check("second rollback", ch, err, Changed{Deployment: 2, Changes: []stackfile.Change{update(r1, r2), worker}})

	ch, err = d.Redeploy("web", "api")
	redeploy := stackfile.Change{Service: "api", Action: stackfile.ActionUpdate, FromRevision: r2, ToRevision: r2 + "-r1", FromReplicas: 2, ToReplicas: 2}
	check("redeploy", ch, err, Changed{Deployment: 3, Changes: []stackfile.Change{redeploy, worker}})

	gone := []stackfile.Change{
		{Service: "api", Action: stackfile.ActionRemove, FromRevision: r2 + "-r1", FromReplicas: 2},
		{Service: "worker", Action: stackfile.ActionRemove, FromRevision: v1["worker"], FromReplicas: 1},
	}
	ch, err = d.Remove("web")
	check("remove", ch, err, Changed{Deployment: 4, Changes: gone})
	ch, err = d.Remove("web")
	check("second remove", ch, err, Changed{Deployment: 4, Changes: gone, Already: true})
}
