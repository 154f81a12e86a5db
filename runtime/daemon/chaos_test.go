package daemon_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// Fault injection is compiled only into the chaos build (-tags chaos),
// through Options.Hooks. The binary these tests run is the shipped one:
// it has none (hooks_test.go proves the wiring with a fake hook).

// CHS-2: the shipped binary answers the chaos op with what is missing.
func TestCHS2ShippedBinaryRefusesTheChaosOp(t *testing.T) {
	n := newNode(t)
	n.start("running")
	c, err := n.client()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Chaos(t.Context(), control.ChaosArgs{Kind: "panic", Target: "root"})
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != control.CodeRefused || !strings.Contains(ce.Message, "built without -tags chaos") {
		t.Fatalf("chaos op on the shipped binary: %v", err)
	}
}

// CHS-2: the shipped binary holds a failed boot on chaos.enabled: true, a
// config error that says why.
func TestCHS2ShippedBinaryRefusesChaosEnabled(t *testing.T) {
	n := newNode(t)
	n.extra = "chaos: {enabled: true}\n"
	n.writeConfig()
	// A config that does not load leaves the data directory to the flag.
	n.flags = []string{"--data-dir", n.data()}
	n.start("failed")
	st, err := n.status()
	if err != nil {
		t.Fatal(err)
	}
	last := st.Daemon.Lifecycle.LastError
	if last == nil || last.Class != lifecycle.CauseConfig || !strings.Contains(last.Error(), "chaos.enabled") ||
		!strings.Contains(last.Error(), "built without -tags chaos") {
		t.Fatalf("boot failure %+v", last)
	}
}
