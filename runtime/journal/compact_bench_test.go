package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPERF6Compaction compares the journal's write-driven compaction
// (compact.go, badger running no compactor) with badger's own two
// compactors, in the same run and interleaved so that the machine's load
// hits both alike: synced event appends in batches of 1,000 until enough
// memtables have been flushed that compaction has to keep up
// (ENGENHO_COMPACT_EVENTS, default 1,500,000 events, some 25 memtable
// flushes), then synced intent writes on the compacted journal, in
// ENGENHO_COMPACT_ROUNDS (default 5) rounds. It prints each round, the
// process's CPU per event (compaction included) and the spread of the
// ratios (write-driven / badger's), and level 0's largest size seen
// (badger stalls writes at 15 tables).
// Run: go test -run '^$' -bench PERF6Compaction -benchtime 1x ./runtime/journal/
func BenchmarkPERF6Compaction(b *testing.B) {
	events := 1_500_000
	if v, err := strconv.Atoi(os.Getenv("ENGENHO_COMPACT_EVENTS")); err == nil && v > 0 {
		events = v
	}
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("ENGENHO_COMPACT_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	type result struct {
		perSec   float64
		cpuUs    float64       // the process's CPU per event, compaction included
		intent   time.Duration // p50 of synced intent writes afterwards
		l0Max    int
		l0End    int
		compacts uint64
	}
	modes := []struct {
		name   string
		native int
	}{{"write-driven (engenho)", 0}, {"badger's 2 compactors", 2}}
	res := make([][]result, len(modes))
	batch := perfEvents(1000)
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for k := range modes {
				m := (k + r) % len(modes) // alternate which goes first
				mode := modes[m]
				dir := filepath.Join(b.TempDir(), "journal")
				j, err := Open(Options{Dir: dir, GCInterval: -1, Retention: Retention{Interval: -1}, nativeCompactors: mode.native})
				noErr(b, err)
				l0Max := 0
				cpu0 := processCPU()
				start := time.Now()
				for n := 0; n < events; n += len(batch) {
					if _, err := j.Append(batch...); err != nil {
						b.Fatal(err)
					}
					if n%20_000 == 0 {
						l0Max = max(l0Max, j.db.Levels()[0].NumTables)
					}
				}
				perSec := float64(events) / time.Since(start).Seconds()
				lat, err := IntentLatencies(j, 500)
				noErr(b, err)
				// Let the compaction the appends caused finish: its CPU
				// belongs to them.
				for j.db.Levels()[0].NumTables >= 5 && time.Since(start) < 5*time.Minute {
					time.Sleep(50 * time.Millisecond)
				}
				cpuUs := float64((processCPU() - cpu0).Microseconds()) / float64(events)
				res[m] = append(res[m], result{perSec: perSec, cpuUs: cpuUs, intent: Percentile(lat, 0.5),
					l0Max: l0Max, l0End: j.db.Levels()[0].NumTables, compacts: j.Stats().Compactions})
				noErr(b, j.Close())
			}
		}
	}
	fmt.Printf("\nPERF-6 journal compaction, %d synced event appends (batches of 1,000) then 500 synced intents, interleaved rounds\n", events)
	fmt.Printf("%-24s  %-5s  %-10s  %-12s  %-14s  %-7s  %-6s  %s\n", "compaction", "round", "events/s", "cpu us/event", "intent p50 ms", "L0 max", "L0 end", "passes")
	for r := range res[0] {
		for m, mode := range modes {
			x := res[m][r]
			fmt.Printf("%-24s  %-5d  %-10.0f  %-12.2f  %-14.3f  %-7d  %-6d  %d\n", mode.name, r+1, x.perSec, x.cpuUs, float64(x.intent)/1e6, x.l0Max, x.l0End, x.compacts)
		}
	}
	var ratios, intentRatios, cpuRatios []float64
	for r := range res[0] {
		ratios = append(ratios, res[0][r].perSec/res[1][r].perSec)
		cpuRatios = append(cpuRatios, res[0][r].cpuUs/res[1][r].cpuUs)
		intentRatios = append(intentRatios, float64(res[0][r].intent)/float64(res[1][r].intent))
	}
	slices.Sort(ratios)
	slices.Sort(intentRatios)
	slices.Sort(cpuRatios)
	fmt.Printf("event throughput, write-driven / badger's: min %.2f, median %.2f, max %.2f (>= 1 is no worse)\n", ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1])
	fmt.Printf("cpu per event, write-driven / badger's: min %.2f, median %.2f, max %.2f (<= 1 is no worse)\n", cpuRatios[0], cpuRatios[len(cpuRatios)/2], cpuRatios[len(cpuRatios)-1])
	fmt.Printf("intent p50, write-driven / badger's: min %.2f, median %.2f, max %.2f (<= 1 is no worse)\n", intentRatios[0], intentRatios[len(intentRatios)/2], intentRatios[len(intentRatios)-1])
	b.ReportMetric(ratios[len(ratios)/2], "throughput-ratio")
	b.ReportMetric(cpuRatios[len(cpuRatios)/2], "cpu-ratio")
	b.ReportMetric(intentRatios[len(intentRatios)/2], "intent-p50-ratio")
	b.ReportMetric(0, "ns/op")
}

// processCPU is this process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func init() {
	if v, err := time.ParseDuration(os.Getenv("ENGENHO_COMPACT_DELAY")); err == nil {
		compactDelay = v
	}
}
