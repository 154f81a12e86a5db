package journal

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

// PERF-6: a synced intent write, p50 target <= 2ms.
func BenchmarkSyncedIntentWrite(b *testing.B) {
	j, _ := openTest(b, b.TempDir(), func(o *Options) { o.GCInterval, o.Retention.Interval = -1, -1 })
	b.ResetTimer()
	lat, err := IntentLatencies(j, b.N)
	b.StopTimer()
	noErr(b, err)
	b.ReportMetric(float64(Percentile(lat, 0.50))/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(Percentile(lat, 0.99))/float64(time.Millisecond), "p99-ms")
}

// PERF-6: batched event appends, target >= 50,000/s.
func BenchmarkAppendBatch1000(b *testing.B) {
	j, _ := openTest(b, b.TempDir(), func(o *Options) { o.GCInterval, o.Retention.Interval = -1, -1 })
	batch := perfEvents(1000)
	b.ResetTimer()
	for b.Loop() {
		if _, err := j.Append(batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "events/s")
}

// Emit is asynchronous; the barrier at the end waits until all are durable.
func BenchmarkEmit(b *testing.B) {
	j, _ := openTest(b, b.TempDir(), func(o *Options) { o.GCInterval, o.Retention.Interval = -1, -1 })
	ev := perfEvents(1)[0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := j.Emit(ev); err != nil {
			b.Fatal(err)
		}
	}
	_, err := j.Append() // inside the timed region: b.Loop would stop the timer first
	noErr(b, err)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestPrintPerfTable prints the PERF-6 table for `make bench`
// (ENGENHO_PERF=1 go test -run TestPrintPerfTable -v ./runtime/journal).
// It measures on the disk under ENGENHO_PERF_DIR (default: the test's
// temporary directory) and asserts nothing about timings.
func TestPrintPerfTable(t *testing.T) {
	if os.Getenv("ENGENHO_PERF") != "1" {
		t.Skip("performance harness: set ENGENHO_PERF=1 to run")
	}
	dir := t.TempDir()
	if d := os.Getenv("ENGENHO_PERF_DIR"); d != "" {
		var err error
		dir, err = os.MkdirTemp(d, "journal-perf-")
		noErr(t, err)
		defer os.RemoveAll(dir)
	}
	table, err := measurePerf(dir)
	noErr(t, err)
	t.Log("\n" + table.String())
}

// BenchmarkREL5Check measures the check a daemon runs before it opens its
// journal (REL-5): a child process of the test binary checks a journal of
// the default size holding 100,000 events (the default retention) and 50
// stacks, closed cleanly. Reports ms per check.
func BenchmarkREL5Check(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "journal")
	j, err := Open(Options{Dir: dir, NoSync: true})
	noErr(b, err)
	for i := range 50 {
		_, err := j.RecordDeployment(fmt.Sprintf("s%d", i), Deployment{Definition: json.RawMessage(`{"services":{}}`), Source: "socket"})
		noErr(b, err)
	}
	for range DefaultMaxEvents {
		noErr(b, j.Emit(messages.Event{Kind: "bench.fill", Message: strings.Repeat("m", 120)}))
	}
	_, err = j.Append()
	noErr(b, err)
	noErr(b, j.Close())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := checkInChild(b, dir, false)
		noErr(b, err)
		b.ReportMetric(float64(out.Took.Milliseconds()), "ms/check")
		b.ReportMetric(float64(out.Report.Records), "records")
	}
}
