package incus

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCycle measures one instance's whole life on the real incusd:
// create (with the entrypoint written in), start until running, exec a
// probe, stop with a 1s grace, delete. go test -run '^$' -bench Cycle
func BenchmarkCycle(b *testing.B) {
	d, err := New(Options{})
	if err != nil {
		b.Skipf("SKIP incus unavailable: %v", err)
	}
	b.Cleanup(func() { d.Close() }) // after the per-instance cleanups
	ctx := context.Background()
	total := map[string]time.Duration{}
	n := 0
	for b.Loop() {
		n++
		name := uniqueName("bench")
		b.Cleanup(func() { // after a failed step
			if _, err := d.Inspect(context.Background(), name); err == nil {
				_ = d.Kill(context.Background(), name)
				_ = d.Delete(context.Background(), name)
			}
		})
		steps := []struct {
			what string
			fn   func() error
		}{
			{"create", func() error { return d.Create(ctx, shSpec(name, "sleep 3600", nil)) }},
			{"start", func() error { return d.Start(ctx, name) }},
			{"exec", func() error { _, err := d.Exec(ctx, name, []string{"true"}); return err }},
			{"stop", func() error { return d.Stop(ctx, name, time.Second) }},
			{"delete", func() error { return d.Delete(ctx, name) }},
		}
		for _, s := range steps {
			t0 := time.Now()
			if err := s.fn(); err != nil {
				b.Fatalf("%s %s: %v", s.what, name, err)
			}
			total[s.what] += time.Since(t0)
		}
	}
	for what, dur := range total {
		b.ReportMetric(float64(dur.Milliseconds())/float64(n), what+"-ms/op")
	}
}
