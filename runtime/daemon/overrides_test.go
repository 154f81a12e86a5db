package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/nodekey"
)

// testKey is the node key of the deployers under test (SEC-2).
var testKey = func() *nodekey.Key {
	k, err := nodekey.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		panic(err)
	}
	return k
}()

// testNode validates stacks against the fake driver only.
type testNode struct{ drv drivers.Driver }

func (n testNode) Driver(name string) (drivers.Driver, bool) { return n.drv, name == fake.DriverName }
func (testNode) PortClaimedBy(int) (string, string, bool)    { return "", "", false }
func (testNode) PortFree(string, int) bool                   { return true }
func (testNode) HostClaimedBy(string) (string, string, bool) { return "", "", false }
func (testNode) Bin() string                                 { return "/bin/true" }

// deployerRig is a Deployer over a real journal, with what it told the
// tree and the events it announced.
type deployerRig struct {
	t   *testing.T
	dir string
	j   *journal.Journal
	d   *Deployer

	mu     sync.Mutex
	told   map[string]messages.ApplyStack
	events []messages.Event
}

var rigNow = time.Date(2030, 1, 2, 12, 3, 0, 0, time.Local)

func newRig(t *testing.T, dir string) *deployerRig {
	t.Helper()
	j, err := journal.Open(journal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := &deployerRig{t: t, dir: dir, j: j, told: map[string]messages.ApplyStack{}}
	r.d = NewDeployer(j, testNode{fake.New(fake.Options{})}, testKey)
	r.d.now = func() time.Time { return rigNow }
	r.d.announce = func(ev messages.Event) {
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
	}
	r.d.Attach(func(msg any) {
		if m, ok := msg.(messages.ApplyStack); ok {
			r.mu.Lock()
			r.told[m.Stack] = m
			r.mu.Unlock()
		}
	})
	t.Cleanup(func() { _ = j.Close() })
	return r
}

// restart closes the journal and opens a new deployer on it, as a daemon
// restart (clean or SIGKILL: every write was synced) does; the tree
// starts on Desired.
func (r *deployerRig) restart() *deployerRig {
	r.t.Helper()
	if err := r.j.Close(); err != nil {
		r.t.Fatal(err)
	}
	next := newRig(r.t, r.dir)
	desired, _, err := next.d.Desired()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, m := range desired {
		next.told[m.Stack] = m
	}
	return next
}

func ovStack(replicas int, version string) string {
	return fmt.Sprintf(`name: web
services:
  api:
    driver: fake
    command: ["/bin/api"]
    env: {VERSION: %q}
    deploy: {replicas: %d}
  worker:
    driver: fake
    command: ["/bin/worker"]
`, version, replicas)
}

func (r *deployerRig) apply(yaml string, dryRun bool) Applied {
	r.t.Helper()
	st, err := stackfile.Parse("web.yaml", []byte(yaml))
	if err != nil {
		r.t.Fatal(err)
	}
	a, err := r.d.Apply(context.Background(), st, "/etc/engenho/web.yaml", dryRun, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return a
}

// running is what the tree was last told for a service: replicas and
// the deployment.
func (r *deployerRig) running(service string) (int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.told["web"]
	return m.Current.Definition.Services[service].Deploy.Replicas, m.Current.ID
}

func (r *deployerRig) takeEvents() []messages.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.events
	r.events = nil
	return evs
}

func (r *deployerRig) wantRunning(service string, replicas int, deployment string) {
	r.t.Helper()
	if n, dep := r.running(service); n != replicas || dep != deployment {
		r.t.Fatalf("%s: the tree runs %d replicas of deployment %s, want %d of %s", service, n, dep, replicas, deployment)
	}
}

func hasNote(a Applied, sub string) bool {
	for _, n := range a.Notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

func onlyUnchanged(a Applied) bool { return unchanged(a.Changes) }

var rootUser = journal.Who{UID: 0, GID: 0, PID: 99, User: "root"}

// SVC-23 (new rule, docs/services.md "Operator overrides"), SVC-17,
// DMN-10, REL-3: `engenho scale` is an override of the stack file's count.
// It is recorded (synced) with who and when and what it replaced, runs at
// once, and holds through a reload of the same file, a restart and an edit
// of an unrelated field; it is dropped, with an event, only when the file
// changes deploy.replicas. Run twice, it changes nothing the second time.
func TestSVC23ScaleOverrideHoldsUntilTheFileChangesReplicas(t *testing.T) {
	r := newRig(t, t.TempDir())
	r.apply(ovStack(3, "v1"), false)
	r.wantRunning("api", 3, "1")

	sc, err := r.d.Scale("web", "api", 5, rootUser)
	if err != nil || !sc.Changed || sc.From != 3 || sc.To != 5 || sc.File != 3 || sc.Override == nil ||
		sc.Override.By != rootUser || !sc.Override.At.Equal(rigNow) || sc.Override.Replaced != "3" {
		t.Fatalf("scale: %+v %v", sc, err)
	}
	r.wantRunning("api", 5, "1") // an override, not a deployment
	if evs := r.takeEvents(); len(evs) != 1 || evs[0].Kind != messages.KindOverrideSet || evs[0].Fields["by_user"] != "root" {
		t.Fatalf("events after scale: %+v", evs)
	}
	// A command run twice: nothing changes, the first record stays.
	again, err := r.d.Scale("web", "api", 5, journal.Who{UID: 1000})
	if err != nil || again.Changed || again.Override == nil || again.Override.By != rootUser {
		t.Fatalf("scale again: %+v %v", again, err)
	}
	if evs := r.takeEvents(); len(evs) != 0 {
		t.Fatalf("a repeated scale announced %+v", evs)
	}

	// A reload of the same file keeps it and says so.
	a := r.apply(ovStack(3, "v1"), false)
	if !onlyUnchanged(a) || !hasNote(a, "api: replicas 5 kept (the file says 3; scaled by uid 0 (root) at 12:03)") {
		t.Fatalf("reload: %+v", a)
	}
	r.wantRunning("api", 5, "1")

	// A restart starts the tree on the override, and a reload after it too.
	r = r.restart()
	r.wantRunning("api", 5, "1")
	if ov := r.d.Overrides("web", "api"); len(ov) != 1 || ov[0].Value != "5" || ov[0].File != "3" || ov[0].By != "uid 0 (root)" {
		t.Fatalf("status after restart: %+v", ov)
	}
	if a := r.apply(ovStack(3, "v1"), false); !onlyUnchanged(a) {
		t.Fatalf("reload after restart: %+v", a.Changes)
	}
	r.wantRunning("api", 5, "1")

	// An edit of another field: a new deployment, the override holds.
	a = r.apply(ovStack(3, "v2"), false)
	if a.Changes[0].Action != stackfile.ActionUpdate || a.Changes[0].ToReplicas != 5 || !hasNote(a, "replicas 5 kept") {
		t.Fatalf("unrelated edit: %+v", a)
	}
	r.wantRunning("api", 5, "2")
	if evs := r.takeEvents(); len(evs) != 0 {
		t.Fatalf("an unrelated edit announced %+v", evs)
	}

	// A dry run of an edit of the field says what would happen, and does
	// nothing.
	a = r.apply(ovStack(4, "v2"), true)
	if !hasNote(a, "replicas 5 (engenho scale by uid 0 (root)) would be dropped: the stack file changed deploy.replicas from 3 to 4") {
		t.Fatalf("dry run: %+v", a)
	}
	r.wantRunning("api", 5, "2")

	// The edit itself drops the override, with an event.
	a = r.apply(ovStack(4, "v2"), false)
	if a.Changes[0].FromReplicas != 5 || a.Changes[0].ToReplicas != 4 || !hasNote(a, "dropped: the stack file changed deploy.replicas from 3 to 4") {
		t.Fatalf("edit of replicas: %+v", a)
	}
	r.wantRunning("api", 4, "3")
	evs := r.takeEvents()
	if len(evs) != 1 || evs[0].Kind != messages.KindOverrideDropped || evs[0].Service != "api" ||
		!strings.Contains(evs[0].Message, "from 3 to 4") || evs[0].Fields["value"] != "5" {
		t.Fatalf("events after the edit: %+v", evs)
	}
	if ov := r.d.Overrides("web", "api"); len(ov) != 0 {
		t.Fatalf("status after the drop: %+v", ov)
	}
}

// SVC-23, SVC-17: scaling back to the stack file's count drops the
// override (announced); the file's count then runs and nothing is left
// for status to show. An unknown service and a stack being removed are
// refused.
func TestSVC23ScaleBackToTheFileDropsTheOverride(t *testing.T) {
	r := newRig(t, t.TempDir())
	r.apply(ovStack(3, "v1"), false)
	if _, err := r.d.Scale("web", "api", 5, rootUser); err != nil {
		t.Fatal(err)
	}
	r.takeEvents()
	sc, err := r.d.Scale("web", "api", 3, rootUser)
	if err != nil || !sc.Changed || sc.Override != nil || sc.From != 5 {
		t.Fatalf("scale back: %+v %v", sc, err)
	}
	r.wantRunning("api", 3, "1")
	if evs := r.takeEvents(); len(evs) != 1 || evs[0].Kind != messages.KindOverrideDropped {
		t.Fatalf("events: %+v", evs)
	}
	st, _, _ := r.j.Stack("web")
	if len(st.Overrides) != 0 {
		t.Fatalf("journal still holds %+v", st.Overrides)
	}
	if _, err := r.d.Scale("web", "nope", 2, rootUser); !errors.Is(err, ErrUnknownService) {
		t.Fatalf("scale of an unknown service: %v", err)
	}
	// A stack being removed takes no override: it would come back.
	if _, err := r.d.Remove("web", testWho); err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.Scale("web", "api", 4, rootUser); !errors.Is(err, ErrRemoving) {
		t.Fatalf("scale of a stack being removed: %v", err)
	}
	if _, err := r.d.Rollback("web", rootUser); !errors.Is(err, ErrRemoving) {
		t.Fatalf("rollback of a stack being removed: %v", err)
	}
}

// SVC-23, SVC-17: a rollback away from what the stack file declares is an
// override: a reload of the same file and a restart keep it; a second
// rollback, back to the file's deployment, drops it; so does an edit of
// the file, which is then deployed. A scale during the rollback is kept
// against the file's count, not the rolled-back deployment's.
func TestSVC23RollbackHoldsUntilTheFileChanges(t *testing.T) {
	r := newRig(t, t.TempDir())
	r.apply(ovStack(2, "v1"), false)
	r.apply(ovStack(3, "v2"), false)
	rb, err := r.d.Rollback("web", rootUser)
	if err != nil || rb.From != 2 || rb.To != 1 || rb.Override == nil || rb.Override.Replaced != "2" {
		t.Fatalf("rollback: %+v %v", rb, err)
	}
	r.wantRunning("api", 2, "1")
	if evs := r.takeEvents(); len(evs) != 1 || evs[0].Kind != messages.KindOverrideSet || evs[0].Stack != "web" {
		t.Fatalf("events: %+v", evs)
	}
	// The file is unchanged: a reload does not undo the rollback.
	a := r.apply(ovStack(3, "v2"), false)
	if !onlyUnchanged(a) || !hasNote(a, "rollback to deployment 1") || !hasNote(a, "`engenho rollback web` to go back to deployment 2") {
		t.Fatalf("reload during the rollback: %+v", a)
	}
	r.wantRunning("api", 2, "1")
	r = r.restart()
	r.wantRunning("api", 2, "1")
	if a := r.apply(ovStack(3, "v2"), false); !onlyUnchanged(a) {
		t.Fatalf("reload after restart: %+v", a.Changes)
	}
	if ov := r.d.Overrides("web", "worker"); len(ov) != 1 || ov[0].Field != messages.OverrideDeployment || ov[0].Value != "1" || ov[0].File != "2" {
		t.Fatalf("status of a rolled-back stack: %+v", ov)
	}
	// A scale now is against the file's 3, not deployment 1's 2.
	sc, err := r.d.Scale("web", "api", 6, rootUser)
	if err != nil || sc.File != 3 || sc.From != 2 {
		t.Fatalf("scale during the rollback: %+v %v", sc, err)
	}
	// A second rollback goes back to the file's deployment: no rollback
	// override is left; the scale holds.
	rb, err = r.d.Rollback("web", rootUser)
	if err != nil || rb.To != 2 || rb.Override != nil {
		t.Fatalf("second rollback: %+v %v", rb, err)
	}
	r.wantRunning("api", 6, "2")
	evs := r.takeEvents()
	if len(evs) != 2 || evs[1].Kind != messages.KindOverrideDropped || evs[1].Fields["field"] != journal.FieldDeployment {
		t.Fatalf("events: %+v", evs)
	}
	// Rolled back again, then the file changes: the file wins, announced.
	if _, err := r.d.Rollback("web", rootUser); err != nil {
		t.Fatal(err)
	}
	r.takeEvents()
	a = r.apply(ovStack(3, "v3"), false)
	if !hasNote(a, "rollback to deployment 1 dropped: the stack file changed since the rollback") {
		t.Fatalf("edit during the rollback: %+v", a)
	}
	r.wantRunning("api", 6, "3")
	evs = r.takeEvents()
	if len(evs) != 1 || evs[0].Kind != messages.KindOverrideDropped {
		t.Fatalf("events: %+v", evs)
	}
}

// SVC-10, SVC-23: a stopped service stays stopped across a reload and a
// restart (the stack file has no such field), with who stopped it in
// status; when the file drops the service, its stopped intent is lifted
// with an event, so a later service of that name starts.
func TestSVC23StoppedIntentHoldsAndGoesWithItsService(t *testing.T) {
	r := newRig(t, t.TempDir())
	r.apply(ovStack(1, "v1"), false)
	alice := journal.Who{UID: 1000, GID: 1000, User: "alice"}
	if err := r.d.SetStopped("web", "worker", true, alice); err != nil {
		t.Fatal(err)
	}
	r.apply(ovStack(1, "v1"), false)
	r = r.restart()
	r.mu.Lock()
	stopped := r.told["web"].Stopped["worker"]
	r.mu.Unlock()
	if !stopped {
		t.Fatal("the stopped intent was lost across a reload and a restart")
	}
	ov := r.d.Overrides("web", "worker")
	if len(ov) != 1 || ov[0].Field != messages.OverrideStopped || ov[0].By != "uid 1000 (alice)" {
		t.Fatalf("status of the stopped service: %+v", ov)
	}
	r.apply(`name: web
services:
  api:
    driver: fake
    command: ["/bin/api"]
`, false)
	if is, _ := r.j.IsStopped("web", "worker"); is {
		t.Fatal("the stopped intent of a removed service was kept")
	}
	if evs := r.takeEvents(); len(evs) != 1 || evs[0].Kind != messages.KindOverrideDropped || evs[0].Service != "worker" {
		t.Fatalf("events: %+v", evs)
	}
}

// SVC-23: a declaration's digest is the definition's, whatever file it was
// read from, and survives the journal's round trip.
func TestSVC23DigestIgnoresTheSourceAndSurvivesTheJournal(t *testing.T) {
	a, _ := stackfile.Parse("a.yaml", []byte(ovStack(3, "v1")))
	b, _ := stackfile.Parse("elsewhere/b.yml", []byte(ovStack(3, "v1")))
	c, _ := stackfile.Parse("a.yaml", []byte(ovStack(3, "v2")))
	da, _ := digestOf(a, testKey)
	db, _ := digestOf(b, testKey)
	dc, _ := digestOf(c, testKey)
	raw, err := stackfile.Marshal(a, testKey)
	if err != nil {
		t.Fatal(err)
	}
	back, err := stackfile.Unmarshal(raw, testKey)
	if err != nil {
		t.Fatal(err)
	}
	dback, _ := digestOf(back, testKey)
	if da != db || da != dback || da == dc || !strings.HasPrefix(da, "sha256:") {
		t.Fatalf("digests: %s %s %s %s", da, db, dback, dc)
	}
}

// SVC-23: a journal written before declarations were kept (deployments
// without one) works: a scale is recorded against the deployment's count,
// a rollback records the declaration it rolled back from, and reloads of
// the same file keep both.
func TestSVC23JournalFromAnOlderVersion(t *testing.T) {
	r := newRig(t, t.TempDir())
	for _, v := range []string{"v1", "v2"} {
		st, _ := stackfile.Parse("web.yaml", []byte(ovStack(3, v)))
		def, _ := stackfile.Marshal(st, testKey)
		revs := map[string]string{}
		for name, svc := range st.Services {
			revs[name] = svc.Revision()
		}
		if _, err := r.j.RecordDeployment("web", journal.Deployment{Definition: def, Revisions: revs, Source: "/etc/engenho/web.yaml"}); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := r.d.Scale("web", "api", 5, rootUser)
	if err != nil || sc.File != 3 || sc.Override == nil {
		t.Fatalf("scale: %+v %v", sc, err)
	}
	rb, err := r.d.Rollback("web", rootUser)
	if err != nil || rb.Override == nil || rb.To != 1 {
		t.Fatalf("rollback: %+v %v", rb, err)
	}
	st, _, _ := r.j.Stack("web")
	if st.Declared == nil || st.Declared.Replicas["api"] != 3 || st.Declared.Source != "/etc/engenho/web.yaml" {
		t.Fatalf("after the rollback: declared %+v", st.Declared)
	}
	for i := 0; i < 2; i++ {
		if a := r.apply(ovStack(3, "v2"), false); !onlyUnchanged(a) || !hasNote(a, "replicas 5 kept") || !hasNote(a, "rollback to deployment 1") {
			t.Fatalf("reload %d: %+v", i, a)
		}
	}
	r.wantRunning("api", 5, "1")
}

// BenchmarkSVC23ScaleOverride is one `engenho scale` as the deployer does
// it, without the socket: the synced override write (the desired-state
// record rewritten) and the durable event, each op alternating between an
// override and the file's count.
func BenchmarkSVC23ScaleOverride(b *testing.B) {
	d := newRigB(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 3 + (i+1)%2*2
		if _, err := d.Scale("web", "api", n, rootUser); err != nil {
			b.Fatal(err)
		}
	}
}

// newRigB is a deployer over a real, synced journal with the stack of
// ovStack applied, for benchmarks.
func newRigB(b *testing.B) *Deployer {
	j, err := journal.Open(journal.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = j.Close() })
	d := NewDeployer(j, testNode{fake.New(fake.Options{})}, testKey)
	d.announce = func(ev messages.Event) {
		if _, err := j.Append(ev); err != nil {
			b.Fatal(err)
		}
	}
	st, _ := stackfile.Parse("web.yaml", []byte(ovStack(3, "v1")))
	if _, err := d.Apply(context.Background(), st, "/etc/engenho/web.yaml", false, nil); err != nil {
		b.Fatal(err)
	}
	return d
}
