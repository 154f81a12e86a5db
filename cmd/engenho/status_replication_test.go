package main

import (
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

// ACT-17: status shows per host the replication class, how long ago the
// last checkpoint shipped, and the current loss window (awake hosts only).
func TestACT17StatusReplicationColumns(t *testing.T) {
	awake := messages.HostStatus{Host: "notes.localhost", Stack: "web", Service: "notes", State: messages.HostAwake,
		Since: now.Add(-20 * time.Minute), Replication: "batched",
		Replicated: messages.Replicated{LastShipped: now.Add(-4 * time.Minute), LastShippedBytes: 4096, Synced: now.Add(-2 * time.Minute)}}
	asleep := messages.HostStatus{Host: "cold.localhost", Stack: "web", Service: "cold", State: messages.HostAsleep,
		Since: now.Add(-time.Hour), Replication: "daily"}
	out := hostTable([]messages.HostStatus{awake, asleep}, now)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "REPLICATION") || !strings.Contains(lines[0], "SHIPPED") || !strings.Contains(lines[0], "LOSS WINDOW") {
		t.Fatalf("host table:\n%s", out)
	}
	for _, want := range []string{"batched", "4m ago", " 2m "} {
		if !strings.Contains(lines[1]+" ", want) {
			t.Errorf("awake row lacks %q:\n%s", want, lines[1])
		}
	}
	class, shipped, window := replicationCells(asleep, now)
	if class != "daily" || shipped != "-" || window != "-" {
		t.Errorf("asleep host cells: %q %q %q", class, shipped, window)
	}
}
