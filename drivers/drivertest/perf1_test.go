package drivertest

import (
	"strings"
	"testing"
	"time"
)

// PERF-1: the harness's arithmetic. A mark is "TAG PID SEC NSEC"; a
// quantile is the nearest rank; a ratio is an arm's quantile over the
// floor's; the table names every arm with its ratios and the target.
func TestPERF1HarnessArithmetic(t *testing.T) {
	m, ok := parseMark("tree 4242 12 500000")
	if !ok || m.Tag != "tree" || m.Pid != 4242 || m.At != 12*time.Second+500*time.Microsecond {
		t.Fatalf("parseMark: %+v %v", m, ok)
	}
	for _, bad := range []string{"", "tree 1 2", "tree x 1 2", "tree 1 2 y"} {
		if _, ok := parseMark(bad); ok {
			t.Errorf("parseMark(%q) accepted", bad)
		}
	}
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond // 100ms .. 1ms, unsorted
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.9: 90 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := Quantile(ds, q); got != want {
			t.Errorf("Quantile(%g) = %s, want %s", q, got, want)
		}
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("Quantile sorted its input")
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing")
	}
	double := make([]time.Duration, len(ds))
	for i, d := range ds {
		double[i] = 2 * d
	}
	r := Perf1Result{Arms: []string{"floor", "tree"}, Latencies: map[string][]time.Duration{"floor": ds, "tree": double}, Settle: 20 * time.Millisecond}
	if got := r.Ratio("tree", "floor", 0.5); got != 2 {
		t.Errorf("Ratio = %g, want 2", got)
	}
	var b strings.Builder
	r.Print(&b, "floor", "load 1 2 3")
	out := b.String()
	for _, want := range []string{"100 kills per arm", "settle 20ms", "load 1 2 3", "floor ", "tree ", "2.00x", "p50 ≤ 1.20x and p99 ≤ 1.50x of floor"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// PERF-1: the note every benchmark's table carries names what was
// measured, the marker and the load, in that order.
func TestPERF1Note(t *testing.T) {
	for _, c := range []struct{ what, want string }{
		{"", "marker C; load 1 2 3"},
		{"the process driver alone", "the process driver alone; marker C; load 1 2 3"},
	} {
		if got := perf1Note(c.what, "C", "1 2 3"); got != c.want {
			t.Errorf("perf1Note(%q) = %q, want %q", c.what, got, c.want)
		}
	}
}
