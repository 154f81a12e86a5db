package root_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/internal/treetest"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/messages"
)

// journaled is a fake driver that records the order of creates and
// deletes, by revision label.
type journaled struct {
	*fake.Driver
	mu  sync.Mutex
	log []string
	rev map[string]string
}

func (j *journaled) Create(ctx context.Context, spec drivers.Spec) error {
	err := j.Driver.Create(ctx, spec)
	j.mu.Lock()
	j.rev[spec.Name] = spec.Labels[drivers.LabelRevision]
	j.log = append(j.log, "create "+spec.Labels[drivers.LabelRevision])
	j.mu.Unlock()
	return err
}

func (j *journaled) Delete(ctx context.Context, name string) error {
	err := j.Driver.Delete(ctx, name)
	j.mu.Lock()
	j.log = append(j.log, "delete "+j.rev[name])
	j.mu.Unlock()
	return err
}

func (j *journaled) entries() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.log...)
}

// SVC-25: through the real tree, a recreate deletes every instance of the
// old revision before it creates any of the new one, and converges.
func TestSVC25RecreateThroughTheTree(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fd := fake.New(fake.Options{Clock: clk, Seed: 1})
	drv := &journaled{Driver: fd, rev: map[string]string{}}
	e := &env{t: t, clk: clk, drv: fd}
	tree, err := treetest.New(treetest.Options{Clock: clk, Driver: drv, Sweep: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.tree = tree
	t.Cleanup(func() { _ = tree.Stop() })
	v1 := strings.Replace(webV1, "replicas: 3", "replicas: 3\n    x-engenho: {rollout: recreate, drain: 0s}", 1)
	e.apply(v1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	oldRev := e.tree.Service("web", "api").Revision
	e.apply(strings.ReplaceAll(v1, `"v1"`, `"v2"`))
	e.until("converged on v2", func() bool {
		st := e.tree.Service("web", "api")
		return e.tree.Converged("web") && st.Revision != oldRev && len(st.Replicas) == 3
	})
	newRev := e.tree.Service("web", "api").Revision
	var order []string
	for _, l := range drv.entries() {
		if strings.HasSuffix(l, oldRev) && strings.HasPrefix(l, "delete") || strings.HasSuffix(l, newRev) {
			order = append(order, strings.Fields(l)[0]+" "+map[bool]string{true: "old", false: "new"}[strings.HasSuffix(l, oldRev)])
		}
	}
	want := "delete old,delete old,delete old,create new,create new,create new"
	if got := strings.Join(order, ","); got != want {
		t.Fatalf("driver calls %s, want %s", got, want)
	}
	if e.tree.Events.Count(messages.KindDeploySucceeded) != 1 {
		t.Fatalf("events:\n%s", e.tree.Events)
	}
}
