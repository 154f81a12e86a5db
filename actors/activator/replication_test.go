package activator

import (
	"net/http"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
)

func (n *node) hostStatus(hostName string) messages.HostStatus {
	r, _ := n.table.Host(hostName)
	return r.Status
}

// ACT-17, ACT-15: a node that dies while its host is awake (no clean
// sleep, no final checkpoint) loses at most the loss window: the node that
// takes over restores the newest state replicated while awake (the second
// batched checkpoint, not the first), and status showed the class, the
// last shipment and a loss window running from the last sync.
func TestACT17CrashRestoresNewestReplicatedState(t *testing.T) {
	mk := sharedStores(t)["fs"]
	p := newPair(t, mk) // batched, the default class
	const h = "notes.localhost"
	visit := func(n int) {
		for range n {
			if code, _, _ := p.a.get(h, "/count"); code != http.StatusOK {
				t.Fatalf("a: %d", code)
			}
		}
	}
	visit(2)
	st := p.a.hostStatus(h)
	if st.Replication != stackfile.ReplicationBatched || !st.LastShipped.IsZero() {
		t.Fatalf("status at wake: class %q, last shipped %v", st.Replication, st.LastShipped)
	}
	shipped := func(after time.Time) func() bool {
		return func() bool { return p.a.hostStatus(h).LastShipped.After(after) }
	}
	if !walkUntil(p.clk, 6*time.Minute, shipped(time.Time{}), p.a, p.b) {
		t.Fatal("no batched checkpoint within 6m")
	}
	first := p.a.hostStatus(h)
	if first.LastShippedBytes <= 0 || first.Synced.IsZero() {
		t.Fatalf("after the first checkpoint: %+v", first.Replicated)
	}
	visit(2)
	if !walkUntil(p.clk, 6*time.Minute, shipped(first.LastShipped), p.a, p.b) {
		t.Fatal("no second batched checkpoint within 6m")
	}
	second := p.a.hostStatus(h)
	if gap := second.LastShipped.Sub(first.LastShipped); gap > 5*time.Minute+2*time.Second {
		t.Fatalf("batched checkpoints %s apart, want at most 5m", gap)
	}
	visit(1) // never shipped: inside the loss window
	now := p.clk.Now()
	if w := p.a.hostStatus(h).LossWindow(now); w != now.Sub(second.Synced) || w > 5*time.Minute {
		t.Fatalf("loss window %s, want now - synced = %s", w, now.Sub(second.Synced))
	}
	p.a.crash()
	var body string
	served := func() bool {
		code, b, _ := p.b.get(h, "/read")
		body = b
		return code == http.StatusOK
	}
	if !walkUntil(p.clk, 2*time.Minute, served, p.b) {
		t.Fatal("b never took over")
	}
	if body != "4|" {
		t.Fatalf("b restored %q, want the newest replicated state \"4|\" (the second checkpoint)", body)
	}
	if st := p.b.hostStatus(h); st.Synced.IsZero() || st.LossWindow(p.clk.Now()) > time.Minute {
		t.Fatalf("b after restoring: %+v, loss window %s", st.Replicated, st.LossWindow(p.clk.Now()))
	}
}
