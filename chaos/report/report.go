package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/schedule"
)

// Report is one campaign's outcome.
type Report struct {
	Scenario string `json:"scenario"`
	Seed     uint64 `json:"seed"`
	// Planned is the number of faults asked for.
	Planned     int    `json:"planned"`
	Fingerprint string `json:"fingerprint"`
	// Components lists what the machine had: process, fs, incus, s3,
	// hosts, each with a note when absent.
	Components []Component `json:"components"`
	// Drawn lists what the schedule was drawn with besides the seed, the
	// fault count and the scenario: "incus", "hosts", "s3-hosts" (CHS-4).
	Drawn []string `json:"drawn_with,omitempty"`
	// Kinds are the fault kinds the schedule drew from.
	Kinds []schedule.Kind `json:"kinds"`
	Plant string          `json:"plant,omitempty"`
	// Run is the run id, the CHAOS_RUN marker in its workloads' env.
	Run      string        `json:"run,omitempty"`
	Version  string        `json:"version,omitempty"`
	Started  time.Time     `json:"started"`
	Duration Millis        `json:"duration_ms"`
	Schedule []string      `json:"schedule"`
	Results  []Result      `json:"results"`
	Summary  []KindSummary `json:"summary"`
	// Final holds the end-of-campaign checks' violations (orphans and
	// leaked goroutines after everything is stopped).
	Final []invariant.Violation `json:"final,omitempty"`
	// Aborted says why the campaign stopped early, if it did.
	Aborted string `json:"aborted,omitempty"`
}

// Component is one part of the machine a campaign may use.
type Component struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Note      string `json:"note,omitempty"`
}

// Result is one fault's outcome.
type Result struct {
	Seq  int           `json:"seq"`
	Kind schedule.Kind `json:"kind"`
	// Fault is the scheduled fault's line.
	Fault string `json:"fault"`
	// Target is what the fault hit, resolved against the live daemon.
	Target string `json:"target,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Skipped says why a fault was not injected (no live candidate).
	Skipped   string `json:"skipped,omitempty"`
	Injected  bool   `json:"injected"`
	Recovered bool   `json:"recovered"`
	Recovery  Millis `json:"recovery_ms"`
	Bound     Millis `json:"bound_ms"`
	// Took is the fault's whole wall time: intents, injection, recovery.
	Took      Millis                `json:"took_ms"`
	Violation []invariant.Violation `json:"violations,omitempty"`
}

// KindSummary aggregates one kind's results.
type KindSummary struct {
	Kind       schedule.Kind `json:"kind"`
	Injected   int           `json:"injected"`
	Recovered  int           `json:"recovered"`
	Skipped    int           `json:"skipped"`
	P50        Millis        `json:"p50_ms"`
	P99        Millis        `json:"p99_ms"`
	Max        Millis        `json:"max_ms"`
	Violations int           `json:"violations"`
	// Took is the wall time the kind's faults took in all.
	Took Millis `json:"took_ms"`
}

// Millis is a duration that JSON shows in milliseconds.
type Millis time.Duration

func (m Millis) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(time.Duration(m).Microseconds()) / 1000)
}

func (m *Millis) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*m = Millis(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

func (m Millis) String() string {
	d := time.Duration(m)
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.String()
}

// Located is a violation with the fault it followed (Seq 0: the final
// checks).
type Located struct {
	Seq   int           `json:"seq"`
	Kind  schedule.Kind `json:"kind,omitempty"`
	Fault string        `json:"fault,omitempty"`
	invariant.Violation
}

// Violations lists every violation in order.
func (r *Report) Violations() []Located {
	var out []Located
	for _, res := range r.Results {
		for _, v := range res.Violation {
			out = append(out, Located{Seq: res.Seq, Kind: res.Kind, Fault: res.Fault, Violation: v})
		}
	}
	for _, v := range r.Final {
		out = append(out, Located{Violation: v})
	}
	return out
}

// OK reports a campaign with no violation that ran to its end.
func (r *Report) OK() bool { return r.Aborted == "" && len(r.Violations()) == 0 }

// Summarize fills r.Summary from r.Results.
func (r *Report) Summarize() {
	byKind := map[schedule.Kind]*KindSummary{}
	times := map[schedule.Kind][]time.Duration{}
	for _, res := range r.Results {
		s := byKind[res.Kind]
		if s == nil {
			s = &KindSummary{Kind: res.Kind}
			byKind[res.Kind] = s
		}
		switch {
		case !res.Injected:
			s.Skipped++
		case res.Recovered:
			s.Injected++
			s.Recovered++
			times[res.Kind] = append(times[res.Kind], time.Duration(res.Recovery))
		default:
			s.Injected++
		}
		s.Violations += len(res.Violation)
		s.Took += res.Took
	}
	r.Summary = r.Summary[:0]
	for k, s := range byKind {
		ts := times[k]
		slices.Sort(ts)
		s.P50, s.P99, s.Max = Millis(Percentile(ts, 50)), Millis(Percentile(ts, 99)), Millis(Percentile(ts, 100))
		r.Summary = append(r.Summary, *s)
	}
	sort.Slice(r.Summary, func(i, j int) bool { return r.Summary[i].Kind < r.Summary[j].Kind })
}

// Percentile is the nearest-rank p-th percentile of sorted ds (0 when
// empty).
func Percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// JSON renders the report.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return append(b, '\n'), nil
}

// Totals counts the injected and recovered faults.
func (r *Report) Totals() (injected, recovered, skipped int) {
	for _, s := range r.Summary {
		injected += s.Injected
		recovered += s.Recovered
		skipped += s.Skipped
	}
	return
}

// Markdown renders the report for people.
func (r *Report) Markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	verdict := "PASSED"
	if !r.OK() {
		verdict = "FAILED"
	}
	p("# Chaos campaign %s: %s\n\n", r.Scenario, verdict)
	injected, recovered, skipped := r.Totals()
	p("- seed **%d**, %d faults planned, schedule fingerprint `%s`\n", r.Seed, r.Planned, r.Fingerprint)
	p("- replay: `engenho chaos run --scenario %s --seed %d --faults %d`\n", r.Scenario, r.Seed, r.Planned)
	p("- started %s, took %s\n", r.Started.UTC().Format(time.RFC3339), r.Duration)
	p("- %d injected, %d recovered, %d skipped, %d violations\n", injected, recovered, skipped, len(r.Violations()))
	if r.Plant != "" {
		p("- planted bug: `%s` (self-test)\n", r.Plant)
	}
	if r.Aborted != "" {
		p("- **aborted**: %s\n", r.Aborted)
	}
	p("\n## Components\n\n| component | available | note |\n|---|---|---|\n")
	for _, c := range r.Components {
		p("| %s | %s | %s |\n", c.Name, yesNo(c.Available), c.Note)
	}
	p("\n## Faults by kind\n\nTime to recover is from the end of the fault to the first look at which every invariant holds.\n\n")
	p("| kind | injected | recovered | skipped | p50 | p99 | max | violations | wall time |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Summary {
		p("| %s | %d | %d | %d | %s | %s | %s | %d | %s |\n", s.Kind, s.Injected, s.Recovered, s.Skipped, s.P50, s.P99, s.Max, s.Violations, s.Took)
	}
	p("\n## Violations\n\n")
	vs := r.Violations()
	if len(vs) == 0 {
		p("None.\n")
	}
	for _, v := range vs {
		where := "final checks"
		if v.Seq > 0 {
			where = fmt.Sprintf("fault %d `%s`", v.Seq, strings.TrimSpace(v.Fault))
		}
		p("- seed %d, %s: **%s** %s: %s\n", r.Seed, where, v.Invariant, v.Subject, mdEscape(v.Evidence))
	}
	p("\n## Faults\n\n| # | kind | target | outcome | recovery | detail |\n|---:|---|---|---|---:|---|\n")
	for _, res := range r.Results {
		outcome := "recovered"
		switch {
		case !res.Injected:
			outcome = "skipped: " + res.Skipped
		case len(res.Violation) > 0:
			outcome = fmt.Sprintf("**%d violations**", len(res.Violation))
		case !res.Recovered:
			outcome = "not recovered"
		}
		p("| %d | %s | %s | %s | %s | %s |\n", res.Seq, res.Kind, mdEscape(res.Target), outcome, res.Recovery, mdEscape(res.Detail))
	}
	return b.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// Write saves report.json and report.md in dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	data, err := r.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
