package activator

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
)

// engenhoBin builds the engenho binary once per test run (or takes
// $ENGENHO_BIN): the demo stack runs its demo-counter subcommand.
func engenhoBin(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("ENGENHO_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "engenho")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/engenho")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building engenho: %v\n%s", err, out)
	}
	return bin
}

// The demo stack configs/stacks/hibernate-demo.yaml works end to end: a
// request wakes it (seed, instance, sidecar), it sleeps after its idle
// window, and its visit count survives the round trip, also when the local
// copy is gone.
func TestDemoStackHibernates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the engenho binary")
	}
	st, err := stackfile.ParseFile("../../configs/stacks/hibernate-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svc := st.Services["notes"]
	if svc.Driver != "process" || svc.Hibernate == nil {
		t.Fatalf("demo service: driver %q hibernate %v", svc.Driver, svc.Hibernate)
	}
	svc.Hibernate.Idle = 500 * time.Millisecond // the demo's 2m, shortened for the test
	def := messages.HostDefinition{Stack: st.Name, Service: "notes", Deployment: "1", Revision: svc.Revision(), Definition: svc}

	clk := clock.New()
	store := fsStore(t, t.TempDir())
	drv := processDriver(t)
	n := newNode(t, "n1", store, clk, nodeOpts{driver: drv, bin: engenhoBin(t)})
	n.define(def)
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	code, body, _ := n.get("notes.localhost", "/")
	if code != http.StatusOK || !strings.Contains(body, "visit 1") || !strings.Contains(body, `seed "seeded"`) {
		t.Fatalf("first visit: %d %q", code, body)
	}
	eventually(t, clk, 0, "asleep after idle", func() bool { return n.events.count(messages.KindHostSlept) == 1 })
	if err := os.RemoveAll(filepath.Join(n.dir, "hosts", "notes.localhost")); err != nil {
		t.Fatal(err)
	}
	code, body, _ = n.get("notes.localhost", "/")
	if code != http.StatusOK || !strings.Contains(body, "visit 2") || !strings.Contains(body, `seed "seeded"`) {
		t.Fatalf("after a round trip through the store: %d %q", code, body)
	}
	if at, ok := n.journal.dueOf("notes.localhost"); !ok || at.Before(time.Now()) {
		t.Fatalf("DEMO_DUE_EVERY gave no due time: %v %v", at, ok)
	}
}
