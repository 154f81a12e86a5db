package lease_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/fake"
	"github.com/engenho/engenho/drivers/objstore/lease"
)

// ACT-14: three nodes with skewed wall clocks acquire, renew (sometimes
// failing), release, crash and race over one host in any order, with time
// moving by any amount: at no moment do two of them hold a lease they may
// act on (Valid).
func TestNeverTwoValidHolders(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clk := clock.NewFake(start)
		store := fake.New(fake.Options{Clock: clk, Seed: rapid.Uint64().Draw(rt, "seed")})
		store.FailRate(fake.OpPut, 0.1, objstore.ErrTransient)
		const nodes = 3
		managers := make([]*lease.Manager, nodes)
		held := make([]*lease.Lease, nodes)
		for i := range nodes {
			skew := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, fmt.Sprintf("skew%d", i)))
			m, err := lease.NewManager(lease.Config{Store: store, Node: fmt.Sprintf("node-%d", i), TTL: ttl, Clock: skewed{clk, skew}})
			if err != nil {
				rt.Fatal(err)
			}
			managers[i] = m
		}
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		for s := range steps {
			i := rapid.IntRange(0, nodes-1).Draw(rt, fmt.Sprintf("node@%d", s))
			switch rapid.IntRange(0, 4).Draw(rt, fmt.Sprintf("action@%d", s)) {
			case 0:
				clk.Advance(time.Duration(rapid.Int64Range(0, int64(ttl)).Draw(rt, fmt.Sprintf("advance@%d", s))))
			case 1:
				if held[i] == nil || !held[i].Valid() {
					l, err := managers[i].Acquire(ctx, "h")
					if err == nil {
						held[i] = l
					} else if !errors.Is(err, lease.ErrHeld) && !errors.Is(err, objstore.ErrTransient) && !errors.Is(err, lease.ErrBusy) {
						rt.Fatalf("acquire: %v", err)
					}
				}
			case 2:
				if held[i] != nil {
					held[i].Renew(ctx)
				}
			case 3:
				if held[i] != nil {
					held[i].Release(ctx)
				}
			case 4: // the node dies: its lease is never renewed or released
				held[i] = nil
				m, _ := lease.NewManager(lease.Config{Store: store, Node: fmt.Sprintf("node-%d", i), TTL: ttl, Clock: clk})
				managers[i] = m
			}
			valid := 0
			for _, l := range held {
				if l != nil && l.Valid() {
					valid++
				}
			}
			if valid > 1 {
				rt.Fatalf("step %d: %d nodes hold a valid lease", s, valid)
			}
		}
	})
}
