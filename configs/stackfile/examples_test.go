package stackfile

import (
	"os"
	"reflect"
	"testing"
)

// exampleFiles are the shipped stacks under configs/stacks written with
// this package (incus-demo.yaml belongs to the incus driver's tests).
var exampleFiles = []string{"demo.yaml", "reference.yaml", "hibernate-demo.yaml"}

// The demo stack that `make run` starts is what its comments say.
func TestDemoStack(t *testing.T) {
	st, err := ParseFile("../../configs/stacks/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "demo" || !reflect.DeepEqual(st.Order, []string{"web", "worker"}) {
		t.Fatalf("stack %s services %v", st.Name, st.Order)
	}
	web := st.Services["web"]
	if !reflect.DeepEqual(web.Command, []string{"${ENGENHO_BIN}", "demo-http"}) || web.Deploy.Replicas != 3 {
		t.Errorf("web: %v x%d", web.Command, web.Deploy.Replicas)
	}
	if web.Healthcheck.Kind != ProbeHTTP || web.Healthcheck.Path != "/healthz" || web.Healthcheck.Port != 80 {
		t.Errorf("web healthcheck %+v", web.Healthcheck)
	}
	if got := web.Published(); len(got) != 1 || got[0].ListenAddr() != "127.0.0.1:8080" || got[0].Target != 80 {
		t.Errorf("web published %+v", got)
	}
	spec := InstanceSpec(web, Instance{Stack: "demo", Slot: 2, ID: "a1", Bin: "/usr/local/bin/engenho", HostPorts: map[int]int{80: 41000}})
	if spec.Command[0] != "/usr/local/bin/engenho" || spec.Env[VarSlot] != "2" || spec.Ports[0].HostPort != 41000 {
		t.Errorf("web spec %+v", spec)
	}
	worker := st.Services["worker"]
	if len(worker.Command) != 3 || worker.Command[0] != "/bin/sh" || worker.Healthcheck.Enabled() {
		t.Errorf("worker %v", worker.Command)
	}
}

// Every shipped example parses, survives the journal round trip, and
// plans as unchanged against itself.
func TestExamplesParse(t *testing.T) {
	for _, f := range exampleFiles {
		st, err := ParseFile("../../configs/stacks/" + f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		back := roundTrip(t, st)
		for _, c := range Plan(st, back) {
			if c.Action != ActionUnchanged {
				t.Errorf("%s: %s after a round trip", f, c)
			}
		}
	}
}

// The reference file's services, spot-checked where a default or a form
// is easy to get wrong.
func TestReferenceStack(t *testing.T) {
	st, err := ParseFile("../../configs/stacks/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db, api := st.Services["db"], st.Services["api"]
	if db.Env["LOG_FORMAT"].Reveal() != "json" || api.Env["LOG_FORMAT"].Reveal() != "text" {
		t.Error("merge: explicit keys must win")
	}
	if !api.Env["DB_PASSWORD"].IsSecret() || !api.Env["API_TOKEN"].IsSecret() || api.Env["DB_HOST"].IsSecret() {
		t.Error("secret marks")
	}
	if got := st.StartOrder(); !reflect.DeepEqual(got, []string{"db", "api", "notes", "nightly"}) {
		t.Errorf("start order %v", got)
	}
	if !st.Services["nightly"].Standalone() || st.Services["notes"].EdgeHost() != "notes.shop.localhost" {
		t.Error("nightly is standalone; notes hibernates under its host")
	}
	if db.Deploy.RestartPolicy.Condition != RestartAny || db.ContainerName != "shop-db" || db.Labels["com.example.tier"] != "data" {
		t.Errorf("db's Compose keys: %+v %q %v", db.Deploy.RestartPolicy, db.ContainerName, db.Labels)
	}
	if _, ok := st.Services["debug_shell"]; ok {
		t.Error("debug_shell is in without its profile")
	}
	dbg, err := ParseWith("reference.yaml", mustRead(t, "../../configs/stacks/reference.yaml"), Options{Profiles: []string{"debug"}})
	if err != nil {
		t.Fatal(err)
	}
	shell := dbg.Services["debug_shell"]
	if !reflect.DeepEqual(shell.Argv(), []string{"/bin/sh", "-c", "exec /opt/shop/bin/shell"}) || !shell.DependsOn[0].Restart || shell.Healthcheck.Kind != ProbeTCP {
		t.Errorf("debug_shell: %v %+v %+v", shell.Argv(), shell.DependsOn, shell.Healthcheck)
	}
	if len(st.Warnings) != 0 || len(dbg.Warnings) != 0 {
		t.Errorf("the reference file warns: %v %v", st.Warnings, dbg.Warnings)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
