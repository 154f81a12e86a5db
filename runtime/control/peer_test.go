package control_test

import (
	"context"
	"os"
	"testing"

	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/control/controltest"
)

// peerScale is a fake whose scale answers with the peer its request
// carried.
type peerScale struct {
	*controltest.Fake
	got chan control.Peer
}

func (h peerScale) Scale(ctx context.Context, a control.ScaleArgs) (control.ScaleResult, error) {
	p, ok := control.PeerFrom(ctx)
	if !ok {
		return control.ScaleResult{}, control.Errorf(control.CodeInternal, "no peer in the request's context")
	}
	h.got <- p
	return h.Fake.Scale(ctx, a)
}

// DMN-11, SVC-23: every request's context carries the SO_PEERCRED
// credentials of the client, so a change can record who asked; outside a
// request there is none.
func TestSVC23RequestsCarryThePeer(t *testing.T) {
	h := peerScale{Fake: newFake(), got: make(chan control.Peer, 1)}
	s := serve(t, h, nil)
	c := dial(t, s.path)
	if _, err := c.Scale(ctx(t), control.ScaleArgs{Stack: "web", Service: "api", Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	p := <-h.got
	if p.UID != uint32(os.Getuid()) || p.GID != uint32(os.Getgid()) || p.PID != int32(os.Getpid()) {
		t.Fatalf("peer %+v, want this process (uid %d, gid %d, pid %d)", p, os.Getuid(), os.Getgid(), os.Getpid())
	}
	if _, ok := control.PeerFrom(context.Background()); ok {
		t.Fatal("a peer outside any request")
	}
	if name := control.UserName(0); name != "root" {
		t.Errorf("uid 0 is %q, want root", name)
	}
}
