package journal

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
)

// PERF-6 targets.
const (
	TargetIntentP50      = 2 * time.Millisecond
	TargetEventsPerSec   = 50_000
	perfIntentWrites     = 500
	perfBatches          = 100
	perfBatchSize        = 1000
	perfConcurrentWriter = 8
	perfConcurrentEach   = 250
	perfEmits            = 50_000
)

// PerfRow is one measured figure.
type PerfRow struct {
	Name   string
	Value  string
	Target string // "" when the figure is informative only
	Met    bool
}

// PerfTable is the journal's PERF-6 report.
type PerfTable struct{ Rows []PerfRow }

// String renders the table for `make bench`.
func (t PerfTable) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-44s %-16s %-12s %s\n", "journal (PERF-6)", "value", "target", "met")
	for _, r := range t.Rows {
		met := "-"
		if r.Target != "" {
			met = map[bool]string{true: "yes", false: "NO"}[r.Met]
		}
		fmt.Fprintf(&b, "%-44s %-16s %-12s %s\n", r.Name, r.Value, r.Target, met)
	}
	return b.String()
}

// measurePerf opens fresh journals under dir (which should be on the disk
// the daemon uses) and measures synced intent writes and event appends,
// each next to a baseline measured in the same run on the same disk (a raw
// write+fsync of a file; JSON-encoding the same events and writing them to
// a file with one fsync per batch), so that the ratio stays meaningful on a
// busy machine. It uses the wall clock; it asserts nothing, it reports.
func measurePerf(dir string) (PerfTable, error) {
	var t PerfTable
	steps := []func(string, *PerfTable) error{perfIntents, perfBatched, perfConcurrent, perfEmit}
	for i, step := range steps {
		if err := step(filepath.Join(dir, fmt.Sprintf("perf-%d", i)), &t); err != nil {
			return t, err
		}
	}
	return t, nil
}

func perfOpen(dir string) (*Journal, error) {
	return Open(Options{Dir: dir, Retention: Retention{Interval: -1}, GCInterval: -1})
}

func perfIntents(dir string, t *PerfTable) error {
	j, err := perfOpen(dir)
	if err != nil {
		return err
	}
	defer j.Close()
	lat, err := IntentLatencies(j, perfIntentWrites)
	if err != nil {
		return err
	}
	base, err := fsyncLatencies(filepath.Join(dir, "baseline"), perfIntentWrites)
	if err != nil {
		return err
	}
	p50, p99, b50 := Percentile(lat, 0.50), Percentile(lat, 0.99), Percentile(base, 0.50)
	t.Rows = append(t.Rows,
		PerfRow{Name: "synced intent write p50", Value: p50.String(), Target: "<= " + TargetIntentP50.String(), Met: p50 <= TargetIntentP50},
		PerfRow{Name: "synced intent write p99", Value: p99.String()},
		PerfRow{Name: "  baseline: raw write+fsync p50", Value: b50.String()},
		PerfRow{Name: "  intent p50 / fsync p50", Value: fmt.Sprintf("%.2fx", float64(p50)/float64(b50))},
	)
	return nil
}

// fsyncLatencies writes 64 bytes and fsyncs a file n times.
func fsyncLatencies(path string, n int) ([]time.Duration, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	clk, buf := clock.New(), make([]byte, 64)
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := clk.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
		out = append(out, clk.Since(start))
	}
	return out, nil
}

// rawAppendRate JSON-encodes the batch and writes it to a file with one
// fsync per batch, batches times: the floor for a synced batched append.
func rawAppendRate(path string, batch []messages.Event, batches int) (float64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	clk := clock.New()
	start := clk.Now()
	for i := 0; i < batches; i++ {
		var buf []byte
		for k := range batch {
			b, err := json.Marshal(batch[k])
			if err != nil {
				return 0, err
			}
			buf = append(buf, b...)
		}
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return rate(len(batch)*batches, clk.Since(start)), nil
}

// IntentLatencies performs n synced intent writes (rollout progress, the
// most frequent intent) and returns each one's latency.
func IntentLatencies(j *Journal, n int) ([]time.Duration, error) {
	clk := clock.New()
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		p := RolloutProgress{Stack: "bench", Service: "api", Deployment: 1, Revision: "r1", SlotsDone: []int{1 + i%10}}
		start := clk.Now()
		if err := j.SaveRollout(p); err != nil {
			return nil, err
		}
		out = append(out, clk.Since(start))
	}
	return out, nil
}

// Percentile returns the q-quantile (0..1) of ds.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func perfEvents(n int) []messages.Event {
	evs := make([]messages.Event, n)
	for i := range evs {
		evs[i] = messages.Event{Kind: messages.KindReplicaRestarted, Stack: "bench", Service: "api",
			Instance: "bench-api-1-x1", Message: "replica started", Fields: map[string]string{"slot": "1"}}
	}
	return evs
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func eventsRow(name string, perSec float64, target bool) PerfRow {
	r := PerfRow{Name: name, Value: fmt.Sprintf("%.0f/s", perSec)}
	if target {
		r.Target, r.Met = fmt.Sprintf(">= %d/s", TargetEventsPerSec), perSec >= TargetEventsPerSec
	}
	return r
}

func perfBatched(dir string, t *PerfTable) error {
	j, err := perfOpen(dir)
	if err != nil {
		return err
	}
	defer j.Close()
	batch, clk := perfEvents(perfBatchSize), clock.New()
	start := clk.Now()
	for i := 0; i < perfBatches; i++ {
		if _, err := j.Append(batch...); err != nil {
			return err
		}
	}
	got := rate(perfBatches*perfBatchSize, clk.Since(start))
	base, err := rawAppendRate(filepath.Join(dir, "baseline"), batch, perfBatches)
	if err != nil {
		return err
	}
	t.Rows = append(t.Rows,
		eventsRow(fmt.Sprintf("batched appends (%d/batch, synced)", perfBatchSize), got, true),
		eventsRow("  baseline: encode + write + fsync per batch", base, false),
		PerfRow{Name: "  appends / baseline", Value: fmt.Sprintf("%.2fx", got/base)},
	)
	return nil
}

func perfConcurrent(dir string, t *PerfTable) error {
	j, err := perfOpen(dir)
	if err != nil {
		return err
	}
	defer j.Close()
	ev, clk := perfEvents(1)[0], clock.New()
	errs := make(chan error, perfConcurrentWriter)
	var wg sync.WaitGroup
	start := clk.Now()
	for w := 0; w < perfConcurrentWriter; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perfConcurrentEach; i++ {
				if _, err := j.Append(ev); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	t.Rows = append(t.Rows, eventsRow(fmt.Sprintf("single appends, %d writers (group commit)", perfConcurrentWriter),
		rate(perfConcurrentWriter*perfConcurrentEach, clk.Since(start)), false))
	return nil
}

func perfEmit(dir string, t *PerfTable) error {
	j, err := perfOpen(dir)
	if err != nil {
		return err
	}
	defer j.Close()
	ev, clk := perfEvents(1)[0], clock.New()
	start := clk.Now()
	for i := 0; i < perfEmits; i++ {
		if err := j.Emit(ev); err != nil {
			return err
		}
	}
	if _, err := j.Append(); err != nil {
		return err
	}
	t.Rows = append(t.Rows, eventsRow("emit (async, until durable)", rate(perfEmits, clk.Since(start)), false))
	return nil
}
