package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/schedule"
)

func ms(n int) Millis { return Millis(time.Duration(n) * time.Millisecond) }

func sample() *Report {
	r := &Report{Scenario: "ci", Seed: 42, Planned: 4, Fingerprint: "abc123", Started: time.Unix(0, 0),
		Components: []Component{{Name: "process", Available: true}, {Name: "incus", Note: "no incusd"}}}
	r.Results = []Result{
		{Seq: 1, Kind: schedule.WorkloadKill, Fault: "1 workload.kill shop/web", Injected: true, Recovered: true, Recovery: ms(100)},
		{Seq: 2, Kind: schedule.WorkloadKill, Fault: "2 workload.kill shop/web", Injected: true, Recovered: true, Recovery: ms(300)},
		{Seq: 3, Kind: schedule.DaemonKill, Fault: "3 daemon.kill", Injected: true, Recovered: false,
			Violation: []invariant.Violation{{Invariant: invariant.Acknowledged, Subject: "shop/web", Evidence: "replicas=3 | lost"}}},
		{Seq: 4, Kind: schedule.PanicRoot, Fault: "4 panic.root", Skipped: "no live actor"},
	}
	r.Final = []invariant.Violation{{Invariant: invariant.NoLeaks, Subject: "daemon", Evidence: "+40 probe"}}
	r.Summarize()
	return r
}

// CHS-5 per fault kind: injected, recovered, p50/p99/max, violations.
func TestCHS5Summary(t *testing.T) {
	r := sample()
	if len(r.Summary) != 3 {
		t.Fatalf("summary %+v", r.Summary)
	}
	byKind := map[schedule.Kind]KindSummary{}
	for _, s := range r.Summary {
		byKind[s.Kind] = s
	}
	k := byKind[schedule.WorkloadKill]
	if k.Injected != 2 || k.Recovered != 2 || k.P50 != ms(100) || k.P99 != ms(300) || k.Max != ms(300) || k.Violations != 0 {
		t.Fatalf("workload.kill %+v", k)
	}
	d := byKind[schedule.DaemonKill]
	if d.Injected != 1 || d.Recovered != 0 || d.Violations != 1 || d.Max != 0 {
		t.Fatalf("daemon.kill %+v", d)
	}
	if p := byKind[schedule.PanicRoot]; p.Skipped != 1 || p.Injected != 0 {
		t.Fatalf("panic.root %+v", p)
	}
	if inj, rec, skip := r.Totals(); inj != 3 || rec != 2 || skip != 1 {
		t.Fatalf("totals %d %d %d", inj, rec, skip)
	}
	if r.OK() || len(r.Violations()) != 2 {
		t.Fatalf("violations %v", r.Violations())
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	for _, c := range []struct{ p, want int }{{50, 50}, {99, 99}, {100, 100}, {1, 1}, {0, 1}} {
		if got := Percentile(ds, c.p); got != time.Duration(c.want) {
			t.Errorf("p%d = %d, want %d", c.p, got, c.want)
		}
	}
	if Percentile(nil, 50) != 0 || Percentile(ds[:1], 99) != 1 {
		t.Fatal("edges")
	}
}

// CHS-5 the JSON report round-trips, durations in milliseconds.
func TestCHS5JSON(t *testing.T) {
	r := sample()
	data, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"p99_ms": 300`) || !strings.Contains(string(data), `"seed": 42`) {
		t.Fatalf("json:\n%s", data)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Seed != 42 || back.Results[1].Recovery != ms(300) || len(back.Violations()) != 2 {
		t.Fatalf("round trip %+v", back)
	}
}

// CHS-4, CHS-5 the Markdown report names the verdict, the replay
// command, and each violation with its seed, fault, invariant and
// evidence.
func TestCHS5Markdown(t *testing.T) {
	md := sample().Markdown()
	for _, want := range []string{
		"# Chaos campaign ci: FAILED",
		"engenho chaos run --scenario ci --seed 42 --faults 4",
		"| workload.kill | 2 | 2 | 0 | 100ms | 300ms | 300ms | 0 | 0s |",
		"- seed 42, fault 3 `3 daemon.kill`: **acknowledged** shop/web: replicas=3 \\| lost",
		"- seed 42, final checks: **no-leaked-goroutines** daemon: +40 probe",
		"skipped: no live actor",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	ok := &Report{Scenario: "smoke", Seed: 1}
	ok.Summarize()
	if md := ok.Markdown(); !strings.Contains(md, "PASSED") || !strings.Contains(md, "None.") {
		t.Fatalf("%s", md)
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	if err := sample().Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.json", "report.md"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
