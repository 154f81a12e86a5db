package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

func reopen(t *testing.T, j *Journal) *Journal {
	t.Helper()
	dir := j.Dir()
	noErr(t, j.Close())
	j2, _ := openTest(t, dir, nil)
	return j2
}

// DMN-7: each boot attempt with its phases, timings, outcome and error is
// kept; only the last 64 survive; numbers keep growing across reopen.
func TestBootAttemptsKeepLast64(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), nil)
	for i := 1; i <= 70; i++ {
		a := must(j.RecordBoot(BootAttempt{}))
		if a.Number != uint64(i) || a.Outcome != BootRunning || !a.StartedAt.Equal(clk.Now()) {
			t.Fatalf("attempt %d recorded as %+v", i, a)
		}
		a.Phases = []Phase{{Name: "resolve_config", StartedAt: clk.Now(), Duration: 3 * time.Millisecond},
			{Name: "open_journal", StartedAt: clk.Now(), Duration: time.Second, Error: "boom"}}
		a.Outcome, a.Error, a.EndedAt = BootFailed, "open_journal: boom", clk.Now()
		must(j.RecordBoot(a))
		clk.Advance(time.Second)
	}
	j = reopen(t, j)
	got := must(j.BootAttempts())
	if len(got) != MaxBootAttempts || got[0].Number != 7 || got[63].Number != 70 {
		t.Fatalf("kept %d attempts, %d..%d", len(got), got[0].Number, got[len(got)-1].Number)
	}
	last := got[63]
	if last.Outcome != BootFailed || last.Error != "open_journal: boom" || len(last.Phases) != 2 ||
		last.Phases[1].Duration != time.Second || last.Phases[1].Error != "boom" {
		t.Fatalf("last attempt %+v", last)
	}
	if a := must(j.RecordBoot(BootAttempt{Outcome: BootSucceeded})); a.Number != 71 {
		t.Fatalf("after reopen: number %d, want 71", a.Number)
	}
}

// DMN-5: first boot records the identity; later boots report the same.
func TestIdentityRecordedOnFirstBootThenReported(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	if _, found := must2(j.Identity()); found {
		t.Fatal("identity before first boot")
	}
	id, created, err := j.EnsureIdentity("node-a")
	noErr(t, err)
	if !created || id.Name != "node-a" || len(id.ID) != 32 {
		t.Fatalf("first boot: %+v created=%v", id, created)
	}
	j = reopen(t, j)
	again, created, err := j.EnsureIdentity("renamed")
	noErr(t, err)
	if created || again != id {
		t.Fatalf("later boot: %+v created=%v, want %+v", again, created, id)
	}
	old, found, err := j.ClearIdentity() // DMN-14 reinit identity
	noErr(t, err)
	if !found || old != id {
		t.Fatalf("clear: %+v %v", old, found)
	}
	fresh, created, err := j.EnsureIdentity("node-b")
	noErr(t, err)
	if !created || fresh.ID == id.ID {
		t.Fatalf("after clear: %+v created=%v", fresh, created)
	}
}

func dep(def string, revs map[string]string) Deployment {
	return Deployment{Definition: json.RawMessage(def), Revisions: revs, Source: "/etc/engenho/stacks/web.yaml"}
}

// SVC-5, SVC-17: a deploy keeps the previous definition; rollback swaps
// them so a second rollback undoes the first; ids grow per stack and are
// never reused, even after the stack is removed.
func TestDeploymentsKeepPreviousAndRollbackSwaps(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), nil)
	if _, err := j.Rollback("web"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rollback of unknown stack: %v", err)
	}
	st := must(j.RecordDeployment("web", dep(`{"v":1}`, map[string]string{"api": "r1"})))
	if st.Current.ID != 1 || st.Previous != nil || !st.Current.AppliedAt.Equal(clk.Now()) {
		t.Fatalf("first deploy: %+v", st)
	}
	if _, err := j.Rollback("web"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("rollback without previous: %v", err)
	}
	st = must(j.RecordDeployment("web", dep(`{"v":2}`, map[string]string{"api": "r2"})))
	if st.Current.ID != 2 || st.Previous == nil || st.Previous.ID != 1 {
		t.Fatalf("second deploy: %+v", st)
	}
	other := must(j.RecordDeployment("db", dep(`{}`, nil)))
	if other.Current.ID != 1 {
		t.Fatalf("ids are per stack: %d", other.Current.ID)
	}
	j = reopen(t, j)
	rb := must(j.Rollback("web"))
	if rb.Current.ID != 1 || string(rb.Current.Definition) != `{"v":1}` || rb.Previous.ID != 2 {
		t.Fatalf("rollback: %+v", rb)
	}
	rb = must(j.Rollback("web"))
	if rb.Current.ID != 2 || rb.Previous.ID != 1 || rb.Current.Revisions["api"] != "r2" {
		t.Fatalf("second rollback: %+v", rb)
	}
	stacks := must(j.Stacks())
	if len(stacks) != 2 || stacks[0].Stack != "db" || stacks[1].Stack != "web" {
		t.Fatalf("stacks: %+v", stacks)
	}
	noErr(t, j.RemoveStack("web"))
	if _, found := must2(j.Stack("web")); found {
		t.Fatal("stack still there after remove")
	}
	st = must(j.RecordDeployment("web", dep(`{"v":3}`, nil)))
	if st.Current.ID != 3 || st.Previous != nil {
		t.Fatalf("redeploy after remove: %+v (ids must not be reused)", st)
	}
}

// SVC-2: a bad deployment is refused with a clear error and changes
// nothing; SEC-3: names that could escape a key are refused.
func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	cases := map[string]error{
		"stack with slash": func() error { _, err := j.RecordDeployment("../etc", dep(`{}`, nil)); return err }(),
		"not json":         func() error { _, err := j.RecordDeployment("web", dep(`{`, nil)); return err }(),
		"empty definition": func() error { _, err := j.RecordDeployment("web", Deployment{}); return err }(),
		"bad service":      func() error { _, err := j.RecordDeployment("web", dep(`{}`, map[string]string{"A": "r"})); return err }(),
		"bad revision": func() error {
			_, err := j.RecordDeployment("web", dep(`{}`, map[string]string{"a": "x/y"}))
			return err
		}(),
		"stop bad service": j.StopService("web", "api/../x"),
		"due bad host":     j.SetDue("Host", epoch),
		"owed no lease":    j.OweRelease(messages.OwedRelease{Host: "h"}),
		"rollout slot 0":   j.SaveRollout(RolloutProgress{Stack: "web", Service: "api", Revision: "r", SlotsDone: []int{0, 1}}),
		"failed no dep":    j.MarkFailed(FailedRevision{Stack: "web", Service: "api", Revision: "r"}),
	}
	for name, err := range cases {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	n := 0
	noErr(t, j.Walk("", func(Record) error { n++; return nil }))
	if n != 0 {
		t.Fatalf("refused writes left %d records", n)
	}
}

// SVC-10: a stopped intent is durable until lifted.
func TestStoppedIntentSurvivesReopenUntilStarted(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), nil)
	noErr(t, j.StopService("web", "api"))
	since := clk.Now()
	clk.Advance(time.Minute)
	noErr(t, j.StopService("web", "api")) // again: keeps the first Since
	noErr(t, j.StopService("web", "worker"))
	j = reopen(t, j)
	if !must(j.IsStopped("web", "api")) || must(j.IsStopped("web", "db")) {
		t.Fatal("IsStopped wrong after reopen")
	}
	all := must(j.StoppedServices())
	if len(all) != 2 || all[0].Service != "api" || !all[0].Since.Equal(since) {
		t.Fatalf("stopped: %+v", all)
	}
	noErr(t, j.StartService("web", "api"))
	if must(j.IsStopped("web", "api")) {
		t.Fatal("still stopped after start")
	}
}

// SVC-14: rollout progress (which slots are done) is in the journal, so a
// daemon killed mid-rollout resumes at the slot it reached.
func TestRolloutProgressSurvivesReopen(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	p := RolloutProgress{Stack: "web", Service: "api", Deployment: 4, Revision: "sha256:ab12", SlotsDone: []int{3, 1, 1}}
	noErr(t, j.SaveRollout(p))
	j = reopen(t, j)
	got, found := must2(j.Rollout("web", "api"))
	if !found || got.Deployment != 4 || got.Revision != "sha256:ab12" || !slices.Equal(got.SlotsDone, []int{1, 3}) {
		t.Fatalf("rollout: %+v", got)
	}
	p.SlotsDone = []int{1, 2, 3}
	noErr(t, j.SaveRollout(p))
	if all := must(j.Rollouts()); len(all) != 1 || len(all[0].SlotsDone) != 3 {
		t.Fatalf("rollouts: %+v", all)
	}
	noErr(t, j.ClearRollout("web", "api"))
	if _, found := must2(j.Rollout("web", "api")); found {
		t.Fatal("rollout still there after clear")
	}
}

// SVC-13, SVC-14: a failed revision is remembered by (deployment,
// revision) and not retried; records of deployments that are neither
// current nor previous are dropped on the next deploy; RemoveStack drops
// the stack's intents with it.
func TestFailedRevisionsRememberedPerDeployment(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	for i := 1; i <= 3; i++ {
		must(j.RecordDeployment("web", dep(fmt.Sprintf(`{"v":%d}`, i), nil)))
		noErr(t, j.MarkFailed(FailedRevision{Stack: "web", Service: "api", Deployment: uint64(i), Revision: "r", Reason: "unhealthy"}))
	}
	// Deploying 3 dropped deployment 1's record (neither current nor previous).
	j = reopen(t, j)
	if must(j.IsFailed("web", "api", 1, "r")) {
		t.Fatal("deployment 1 record should be dropped")
	}
	if !must(j.IsFailed("web", "api", 2, "r")) || !must(j.IsFailed("web", "api", 3, "r")) {
		t.Fatal("records of current and previous deployments must stay")
	}
	if must(j.IsFailed("web", "api", 3, "other")) || must(j.IsFailed("web", "ap", 3, "r")) {
		t.Fatal("IsFailed matched the wrong record")
	}
	if got := must(j.FailedRevisions("web")); len(got) != 2 || got[0].Deployment != 2 || got[0].Reason != "unhealthy" {
		t.Fatalf("failed revisions: %+v", got)
	}
	noErr(t, j.StopService("web", "api"))
	noErr(t, j.SaveRollout(RolloutProgress{Stack: "web", Service: "api", Deployment: 3, Revision: "r"}))
	noErr(t, j.StopService("web2", "api"))
	noErr(t, j.RemoveStack("web"))
	var left []string
	noErr(t, j.Walk("", func(r Record) error { left = append(left, r.Key); return nil }))
	want := []string{"v1/deploy-seq/web", "v1/stopped/web2/api"}
	if !slices.Equal(left, want) {
		t.Fatalf("after remove: %v, want %v", left, want)
	}
}

// ACT-10: due times are persisted per host; zero clears.
func TestDueTimesPerHost(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	at := epoch.Add(90 * time.Minute)
	noErr(t, j.SetDue("blog", at))
	noErr(t, j.SetDue("shop", at.Add(time.Hour)))
	j = reopen(t, j)
	d, found := must2(j.Due("blog"))
	if !found || !d.At.Equal(at) || d.Host != "blog" {
		t.Fatalf("due: %+v", d)
	}
	noErr(t, j.SetDue("blog", time.Time{}))
	all := must(j.DueTimes())
	if len(all) != 1 || all[0].Host != "shop" {
		t.Fatalf("due times: %+v", all)
	}
}

// ACT-8: an owed release is kept with the lease's identity until it is
// settled for that lease.
func TestOwedReleaseSettledOnlyForItsEpoch(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), nil)
	r := messages.OwedRelease{Host: "blog", Epoch: "7", ETag: `"abc"`, Expires: epoch.Add(30 * time.Second), Attempts: 1, LastError: "timeout"}
	noErr(t, j.OweRelease(r))
	j = reopen(t, j)
	all := must(j.OwedReleases())
	if len(all) != 1 || all[0].ETag != `"abc"` || all[0].Epoch != "7" || !all[0].OwedSince.Equal(clk.Now()) {
		t.Fatalf("owed: %+v", all)
	}
	if settled := must(j.SettleRelease("blog", "6")); settled {
		t.Fatal("settled a release for another epoch")
	}
	if settled := must(j.SettleRelease("blog", "7")); !settled {
		t.Fatal("release not settled")
	}
	if all := must(j.OwedReleases()); len(all) != 0 {
		t.Fatalf("owed after settle: %+v", all)
	}
}
