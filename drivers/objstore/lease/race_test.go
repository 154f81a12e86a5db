package lease_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/fake"
	"github.com/engenho/engenho/drivers/objstore/fs"
	"github.com/engenho/engenho/drivers/objstore/lease"
	"github.com/engenho/engenho/drivers/objstore/s3/s3test"
)

// backend gives two handles on one bucket, as two daemons would have.
type backend struct {
	name string
	open func(t *testing.T) (objstore.Store, objstore.Store)
}

func backends() []backend {
	return []backend{
		{"fake", func(t *testing.T) (objstore.Store, objstore.Store) {
			s := fake.New(fake.Options{})
			return s, s
		}},
		{"fs-two-openers", func(t *testing.T) (objstore.Store, objstore.Store) {
			dir := t.TempDir()
			open := func() objstore.Store {
				s, err := fs.Open(dir, fs.Options{NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			return open(), open()
		}},
		{"s3-gofakes3", func(t *testing.T) (objstore.Store, objstore.Store) {
			s := s3test.Fake(t, nil)
			return s, s
		}},
		{"s3-minio", func(t *testing.T) (objstore.Store, objstore.Store) {
			s, prefix := s3test.RealStore(t, nil)
			a, b := objstore.Prefixed(s, prefix), objstore.Prefixed(s, prefix)
			return a, b
		}},
	}
}

// ACT-14: two nodes, four goroutines each, race to acquire one host on one
// store, hold it (renewing once) and release it, until each has held it
// three times: never do two hold it at once.
func TestRaceAcquireRelease(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			storeA, storeB := be.open(t)
			clk := clock.NewFake(start)
			const perNode, rounds, maxTries = 4, 3, 20000
			var holding, wins atomic.Int32
			winners := sync.Map{}
			var wg sync.WaitGroup
			errs := make(chan error, 2*perNode)
			for n, store := range []objstore.Store{storeA, storeB} {
				for g := range perNode {
					m := manager(t, store, clk, fmt.Sprintf("node-%d", n))
					wg.Go(func() {
						for won, tries := 0, 0; won < rounds; tries++ {
							if tries == maxTries {
								errs <- fmt.Errorf("node %d/%d: no lease in %d tries", n, g, tries)
								return
							}
							l, err := m.Acquire(ctx, "race.example.com")
							if err != nil {
								if !errorsIsAny(err, errHeldOrTransient...) {
									errs <- fmt.Errorf("node %d/%d acquire: %w", n, g, err)
									return
								}
								runtime.Gosched()
								continue
							}
							won++
							if h := holding.Add(1); h != 1 {
								errs <- fmt.Errorf("%d holders at once", h)
							}
							wins.Add(1)
							winners.Store(m.Holder(), true)
							if err := l.Renew(ctx); err != nil {
								errs <- fmt.Errorf("renew while holding: %w", err)
							}
							holding.Add(-1)
							if err := l.Release(ctx); err != nil {
								errs <- fmt.Errorf("release: %w", err)
							}
						}
					})
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			distinct := 0
			winners.Range(func(any, any) bool { distinct++; return true })
			if wins.Load() != 2*perNode*rounds || distinct != 2*perNode {
				t.Fatalf("%d acquisitions by %d holders", wins.Load(), distinct)
			}
		})
	}
}

// ACT-14: when a node dies, every other node that has seen its lease races
// to take it once the TTL passed: exactly one wins, with the next epoch.
func TestRaceTakeover(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			storeA, storeB := be.open(t)
			clk := clock.NewFake(start)
			dead := acquire(t, manager(t, storeA, clk, "node-dead"), "h")
			const takers = 6
			var ms []*lease.Manager
			for i := range takers {
				store := storeA
				if i%2 == 1 {
					store = storeB
				}
				m := manager(t, store, clk, fmt.Sprintf("node-%d", i))
				wantHeld(t, m, "h", ttl)
				ms = append(ms, m)
			}
			clk.Advance(ttl)
			var wg sync.WaitGroup
			results := make([]error, takers)
			epochs := make([]uint64, takers)
			for i, m := range ms {
				wg.Go(func() {
					l, err := m.Acquire(ctx, "h")
					results[i] = err
					if err == nil {
						epochs[i] = l.Epoch()
					}
				})
			}
			wg.Wait()
			won := 0
			for i, err := range results {
				switch {
				case err == nil:
					won++
					if epochs[i] != dead.Epoch()+1 {
						t.Fatalf("winner epoch %d", epochs[i])
					}
				case !errorsIsAny(err, errHeldOrTransient...):
					t.Fatalf("taker %d: %v", i, err)
				}
			}
			if won != 1 {
				t.Fatalf("%d takers won, want exactly 1", won)
			}
		})
	}
}

var errHeldOrTransient = []error{lease.ErrHeld, objstore.ErrTransient}

func errorsIsAny(err error, kinds ...error) bool {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}
