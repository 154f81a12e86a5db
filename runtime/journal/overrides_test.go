package journal

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func scaled(service, value, file string) Override {
	return Override{Service: service, Field: FieldReplicas, Value: value, File: file, Replaced: file,
		Command: "engenho scale web/" + service + " " + value, By: Who{UID: 0, GID: 0, PID: 42, User: "root"}}
}

// SVC-23 (new rule: operator overrides, see docs/services.md), DMN-10,
// REL-3: an override and the file's declaration are written with the
// deployment in one synced transaction, survive a reopen, and are kept by
// later deployments and rollbacks until a change replaces them; removing
// the stack removes them.
func TestSVC23OverridesKeptWithTheDesiredState(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), nil)
	d := dep(`{"v":1}`, map[string]string{"api": "r1"})
	decl := Declaration{Digest: "sha256:1", Source: "/etc/web.yaml", Replicas: map[string]int{"api": 3}, At: clk.Now()}
	st := must(j.ChangeStack("web", StackChange{Deploy: &d, Declared: &decl}))
	if st.Current.ID != 1 || st.Declared == nil || st.Declared.Replicas["api"] != 3 || len(st.Overrides) != 0 {
		t.Fatalf("first change: %+v", st)
	}
	o := scaled("api", "5", "3")
	o.At = clk.Now()
	must(j.ChangeStack("web", StackChange{SetOverrides: true, Overrides: []Override{o}}))
	j = reopen(t, j)
	st, _ = must2(j.Stack("web"))
	got, ok := st.Override("api", FieldReplicas)
	if !ok || got.Stack != "web" || got.Value != "5" || got.File != "3" || got.By.User != "root" || got.By.PID != 42 || !got.At.Equal(clk.Now()) {
		t.Fatalf("override after reopen: %+v %v", got, ok)
	}
	// A deployment and a rollback keep the overrides and the declaration.
	st = must(j.RecordDeployment("web", dep(`{"v":2}`, map[string]string{"api": "r2"})))
	if _, ok := st.Override("api", FieldReplicas); !ok || st.Declared.Digest != "sha256:1" {
		t.Fatalf("deployment dropped the override: %+v", st)
	}
	pin := Override{Field: FieldDeployment, Value: "1", File: "sha256:1", Replaced: "2", Command: "engenho rollback web"}
	st = must(j.ChangeStack("web", StackChange{Rollback: true, SetOverrides: true, Overrides: append(st.Overrides, pin)}))
	if st.Current.ID != 1 || len(st.Overrides) != 2 {
		t.Fatalf("rollback with a pin: %+v", st)
	}
	st = must(j.Rollback("web"))
	if st.Current.ID != 2 || len(st.Overrides) != 2 {
		t.Fatalf("plain rollback lost the overrides: %+v", st)
	}
	// Replacing the list drops what it leaves out.
	st = must(j.ChangeStack("web", StackChange{SetOverrides: true}))
	if len(st.Overrides) != 0 {
		t.Fatalf("overrides after clearing: %+v", st.Overrides)
	}
	must(j.ChangeStack("web", StackChange{SetOverrides: true, Overrides: []Override{o}}))
	noErr(t, j.RemoveStack("web"))
	var left []string
	noErr(t, j.Walk("", func(r Record) error { left = append(left, r.Key); return nil }))
	if !slices.Equal(left, []string{"v1/deploy-seq/web"}) {
		t.Fatalf("after remove: %v", left)
	}
}

// SVC-23, SEC-3: a bad override or declaration is refused with ErrInvalid
// and nothing is written; a change of an unknown stack is ErrNotFound, a
// rollback without a previous deployment ErrNoPrevious, and neither
// writes anything.
func TestSVC23BadOverridesChangeNothing(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	d := dep(`{"v":1}`, nil)
	must(j.RecordDeployment("web", d))
	long := strings.Repeat("x", 2000)
	bad := map[string]StackChange{
		"unknown field":   {SetOverrides: true, Overrides: []Override{{Service: "api", Field: "image", Value: "x"}}},
		"bad service":     {SetOverrides: true, Overrides: []Override{scaled("../x", "5", "3")}},
		"other stack":     {SetOverrides: true, Overrides: []Override{func() Override { o := scaled("api", "5", "3"); o.Stack = "db"; return o }()}},
		"stack-wide svc":  {SetOverrides: true, Overrides: []Override{{Service: "api", Field: FieldDeployment, Value: "1"}}},
		"twice":           {SetOverrides: true, Overrides: []Override{scaled("api", "5", "3"), scaled("api", "6", "3")}},
		"long command":    {SetOverrides: true, Overrides: []Override{func() Override { o := scaled("api", "5", "3"); o.Command = long; return o }()}},
		"long user":       {SetOverrides: true, Overrides: []Override{func() Override { o := scaled("api", "5", "3"); o.By.User = long; return o }()}},
		"declared svc":    {Declared: &Declaration{Replicas: map[string]int{"A": 1}}},
		"declared neg":    {Declared: &Declaration{Replicas: map[string]int{"api": -1}}},
		"deploy+rollback": {Deploy: &d, Rollback: true},
	}
	for name, c := range bad {
		if _, err := j.ChangeStack("web", c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := j.ChangeStack("nope", StackChange{SetOverrides: true}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown stack: %v", err)
	}
	if _, err := j.ChangeStack("web", StackChange{Rollback: true, SetOverrides: true, Overrides: []Override{scaled("api", "5", "3")}}); !errors.Is(err, ErrNoPrevious) {
		t.Errorf("rollback without previous: %v", err)
	}
	if _, found := must2(j.Stack("nope")); found {
		t.Error("a refused change created a stack")
	}
	st, _ := must2(j.Stack("web"))
	if len(st.Overrides) != 0 || st.Declared != nil || st.Current.ID != 1 {
		t.Errorf("refused changes left %+v", st)
	}
}

// SVC-10, SVC-23: a stopped intent records who stopped the service; a
// second stop keeps the first one's time and author.
func TestSVC23StoppedIntentRecordsWho(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), nil)
	noErr(t, j.StopServiceBy("web", "api", &Who{UID: 1000, GID: 1000, PID: 7, User: "alice"}))
	since := clk.Now()
	clk.Advance(10 * time.Minute)
	noErr(t, j.StopServiceBy("web", "api", &Who{UID: 0, User: "root"}))
	j = reopen(t, j)
	all := must(j.StoppedServices())
	if len(all) != 1 || all[0].By == nil || all[0].By.User != "alice" || all[0].By.String() != "uid 1000 (alice)" || !all[0].Since.Equal(since) {
		t.Fatalf("stopped: %+v", all)
	}
	if got := (Who{UID: 12}).String(); got != "uid 12" {
		t.Errorf("Who without a name: %q", got)
	}
}
