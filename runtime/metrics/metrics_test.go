package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/messages"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// scrape fetches url and parses the text format.
func scrape(t *testing.T, c *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// series returns name's samples as "label=value,..." -> value, labels
// sorted; histograms give their sample count.
func series(fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	f := fams[name]
	if f == nil {
		return out
	}
	for _, m := range f.Metric {
		var ls []string
		for _, l := range m.Label {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(ls)
		var v float64
		switch {
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Histogram != nil:
			v = float64(m.Histogram.GetSampleCount())
		}
		out[strings.Join(ls, ",")] = v
	}
	return out
}

func expect(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]float64) {
	t.Helper()
	got := series(fams, name)
	if len(got) != len(want) {
		t.Errorf("%s: %v, want %v", name, got, want)
		return
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s{%s} = %v (present %v), want %v", name, k, g, ok, v)
		}
	}
}

// fixture is a small tree and two services, as the daemon's snapshots
// would give them.
type fixture struct {
	mu       sync.Mutex
	nodes    []supervise.Node
	services []messages.ServiceStatus
}

func (f *fixture) actors() []supervise.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]supervise.Node(nil), f.nodes...)
}

func (f *fixture) statuses() []messages.ServiceStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]messages.ServiceStatus(nil), f.services...)
}

func newFixture() *fixture {
	return &fixture{
		nodes: []supervise.Node{
			{Path: "root", State: "running"},
			{Path: "root/stack:web", State: "running"},
			{Path: "root/stack:web/service:api", State: "running", Restarts: 2},
			{Path: "root/stack:web/service:api/replica:1", State: "running"},
			{Path: "root/stack:web/service:api/replica:2", State: "restarting", Restarts: 1},
			{Path: "root/stack:web/service:db", State: "running"},
			{Path: "root/activator", State: "running"},
			{Path: "root/activator/host:notes.localhost", State: "asleep"},
		},
		services: []messages.ServiceStatus{
			{
				Stack: "web", Service: "api", State: messages.ServiceFailing, Desired: 2, Running: 1, Healthy: 1,
				Replicas: []messages.ReplicaStatus{
					{Slot: 1, ID: "a1", Restarts: 0},
					{Slot: 2, ID: "a2", Restarts: 4, HasLedger: true, Ledger: messages.Ledger{Failures: 4}},
					// The old instance of slot 2, draining, with a lower position.
					{Slot: 2, ID: "a0", Restarts: 1, HasLedger: true, Ledger: messages.Ledger{Failures: 1}},
				},
			},
			{Stack: "web", Service: "db", State: messages.ServiceConverged, Desired: 1, Running: 1, Healthy: 1,
				Replicas: []messages.ReplicaStatus{{Slot: 1, ID: "d1"}}},
		},
	}
}

// TestDMN19Scrape: a real scrape over a real listener shows every metric
// with its labels and values.
func TestDMN19Scrape(t *testing.T) {
	fx := newFixture()
	m := New(Options{Actors: fx.actors, Services: fx.statuses, Version: "v1.2.3"})
	if err := m.Serve("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	url := "http://" + m.Addr().String() + "/metrics"

	m.ObserveJournalWrite(JournalIntent, 800*time.Microsecond)
	m.ObserveJournalWrite(JournalIntent, 2*time.Millisecond)
	m.ObserveJournalWrite(JournalEvents, 5*time.Millisecond)
	m.LeaseOp(LeaseAcquire, OutcomeOK)
	m.LeaseOp(LeaseAcquire, OutcomeHeld)
	m.LeaseOp(LeaseRenew, OutcomeOK)
	m.LeaseOp(LeaseRenew, OutcomeOK)
	m.LeaseOp(LeaseRelease, "weird") // an unknown outcome is "other"
	for _, s := range []string{StepDefinition, StepLease, StepRestore, StepStart, StepReady, StepSidecars} {
		m.WakeStep(s, 10*time.Millisecond)
	}
	m.WakeStep(StepRestore, 3*time.Second)
	m.Wake(WakeOK, 3100*time.Millisecond)
	m.Wake(WakeFailed, time.Second)
	m.RolloutEvent("web", "api", RolloutStarted)
	m.RolloutEvent("web", "api", RolloutFailed)
	m.RolloutEvent("web", "api", RolloutRolledBack)
	m.RolloutEvent("web", "db", RolloutStarted)
	m.RolloutEvent("web", "db", RolloutSucceeded)

	fams := scrape(t, client, url)
	expect(t, fams, "engenho_actors", map[string]float64{
		"kind=root,state=running": 1, "kind=stack,state=running": 1, "kind=service,state=running": 2,
		"kind=replica,state=running": 1, "kind=replica,state=restarting": 1,
		"kind=activator,state=running": 1, "kind=host,state=asleep": 1,
	})
	expect(t, fams, "engenho_actor_restarts", map[string]float64{
		"kind=root": 0, "kind=stack": 0, "kind=service": 2, "kind=replica": 1, "kind=activator": 0, "kind=host": 0,
	})
	expect(t, fams, "engenho_services", map[string]float64{"state=failing": 1, "state=converged": 1})
	expect(t, fams, "engenho_service_replicas", map[string]float64{
		"service=api,stack=web,state=desired": 2, "service=api,stack=web,state=running": 1, "service=api,stack=web,state=healthy": 1,
		"service=db,stack=web,state=desired": 1, "service=db,stack=web,state=running": 1, "service=db,stack=web,state=healthy": 1,
	})
	expect(t, fams, "engenho_service_restarts", map[string]float64{"service=api,stack=web": 5, "service=db,stack=web": 0})
	// SUP-13: slots without history have no series.
	expect(t, fams, "engenho_ladder_failures", map[string]float64{"service=api,slot=2,stack=web": 4})
	expect(t, fams, "engenho_journal_write_seconds", map[string]float64{"kind=intent": 2, "kind=events": 1})
	expect(t, fams, "engenho_lease_operations_total", map[string]float64{
		"op=acquire,outcome=ok": 1, "op=acquire,outcome=held": 1, "op=renew,outcome=ok": 2, "op=release,outcome=other": 1,
	})
	expect(t, fams, "engenho_wake_step_seconds", map[string]float64{
		"step=definition": 1, "step=lease": 1, "step=restore": 2, "step=start": 1, "step=ready": 1, "step=sidecars": 1,
	})
	expect(t, fams, "engenho_wakes_total", map[string]float64{"outcome=ok": 1, "outcome=failed": 1})
	expect(t, fams, "engenho_wake_seconds", map[string]float64{"": 1})
	expect(t, fams, "engenho_rollouts_total", map[string]float64{
		"event=started,service=api,stack=web": 1, "event=failed,service=api,stack=web": 1, "event=rolled_back,service=api,stack=web": 1,
		"event=started,service=db,stack=web": 1, "event=succeeded,service=db,stack=web": 1,
	})
	expect(t, fams, "engenho_build_info", map[string]float64{"version=v1.2.3": 1})
	if fams["go_goroutines"] == nil || fams["process_open_fds"] == nil {
		t.Error("the Go runtime and process collectors are missing")
	}
	// The restore histogram put the 3s restore in its own bucket.
	for _, mt := range fams["engenho_wake_step_seconds"].Metric {
		if mt.Label[0].GetValue() != StepRestore {
			continue
		}
		if h := mt.Histogram; h.GetSampleSum() < 3 || h.GetSampleSum() > 3.02 {
			t.Errorf("restore sum %v, want 3.01", h.GetSampleSum())
		}
	}

	// Snapshots are read at each scrape: the tree changed, so does the
	// output. A removed service's counters go with ForgetService.
	fx.mu.Lock()
	fx.nodes = fx.nodes[:1]
	fx.services = fx.services[1:]
	fx.mu.Unlock()
	m.ForgetService("web", "api")
	fams = scrape(t, client, url)
	expect(t, fams, "engenho_actors", map[string]float64{"kind=root,state=running": 1})
	expect(t, fams, "engenho_ladder_failures", map[string]float64{})
	expect(t, fams, "engenho_rollouts_total", map[string]float64{
		"event=started,service=db,stack=web": 1, "event=succeeded,service=db,stack=web": 1,
	})

	resp, err := client.Get("http://" + m.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / = %s, want 404", resp.Status)
	}
}

// TestDMN19Cardinality: labels take values only from known sets, so a
// caller passing ids or free text cannot create unbounded series.
func TestDMN19Cardinality(t *testing.T) {
	m := New(Options{NoRuntimeCollectors: true})
	for i := range 100 {
		id := "instance-" + strings.Repeat("x", i)
		m.LeaseOp(id, id)
		m.WakeStep(id, time.Millisecond)
		m.Wake(id, time.Millisecond)
		m.ObserveJournalWrite(id, time.Millisecond)
		m.RolloutEvent("s", "svc", id)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	fams := scrape(t, client, srv.URL)
	for name, want := range map[string]map[string]float64{
		"engenho_lease_operations_total": {"op=other,outcome=other": 100},
		"engenho_wake_step_seconds":      {"step=other": 100},
		"engenho_wakes_total":            {"outcome=other": 100},
		"engenho_journal_write_seconds":  {"kind=other": 100},
		"engenho_rollouts_total":         {"event=other,service=svc,stack=s": 100},
	} {
		expect(t, fams, name, want)
	}
	if fams["go_goroutines"] != nil {
		t.Error("NoRuntimeCollectors still registers the Go collector")
	}
	// Without snapshot functions the snapshot metrics are simply absent.
	if fams["engenho_actors"] != nil || fams["engenho_services"] != nil {
		t.Error("snapshot metrics without sources")
	}
}

func TestActorKind(t *testing.T) {
	for path, want := range map[string]string{
		"root": "root", "root/stack:web": "stack", "root/stack:web/service:api": "service",
		"root/stack:web/service:api/replica:3": "replica", "root/activator/host:a.b": "host",
		"root/activator/host:a.b/sidecar:tick": "sidecar", "": "other", "root/:x": "other",
	} {
		if got := ActorKind(path); got != want {
			t.Errorf("ActorKind(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestNilMetrics: a daemon with metrics off passes a nil *Metrics; every
// method is a no-op.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.ObserveJournalWrite(JournalIntent, time.Millisecond)
	m.LeaseOp(LeaseAcquire, OutcomeOK)
	m.WakeStep(StepLease, time.Millisecond)
	m.Wake(WakeOK, time.Millisecond)
	m.RolloutEvent("a", "b", RolloutStarted)
	m.ForgetService("a", "b")
	if m.Addr() != nil || m.Close() != nil || m.Registry() != nil {
		t.Fatal("nil Metrics is not inert")
	}
	if err := m.Serve("127.0.0.1:0"); err == nil {
		t.Fatal("Serve on nil Metrics: no error")
	}
}

// TestDMN19ServeClose: Close ends the listener, open connections and the
// serving goroutine; an address in use is an error at once; Serve works
// again after Close.
func TestDMN19ServeClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := New(Options{NoRuntimeCollectors: true})
	if err := m.Serve("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := m.Addr().String()
	if err := m.Serve("127.0.0.1:0"); err == nil {
		t.Error("a second Serve: no error")
	}
	other := New(Options{NoRuntimeCollectors: true})
	if err := other.Serve(addr); err == nil {
		other.Close()
		t.Error("serving on an address in use: no error")
	}
	// A kept-alive connection is closed by Close too.
	client := &http.Client{Transport: &http.Transport{}}
	scrape(t, client, "http://"+addr+"/metrics")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if m.Addr() != nil {
		t.Error("Addr after Close")
	}
	if _, err := client.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("still serving after Close")
	}
	client.CloseIdleConnections()
	if err := m.Close(); err != nil {
		t.Error("second Close:", err)
	}
	if err := m.Serve("127.0.0.1:0"); err != nil {
		t.Fatal("Serve after Close:", err)
	}
	if err := m.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Fatal(err)
	}
}

// DRV-16: each sampled replica's usage is exported with its stack,
// service, slot and instance; a replica without a sample has no series.
func TestDRV16ReplicaUsageMetrics(t *testing.T) {
	cores := 0.25
	replicas := func() []messages.ReplicaStatus {
		return []messages.ReplicaStatus{
			{Stack: "web", Service: "api", Slot: 1, Instance: "web-api-1-ab12", Usage: &messages.ReplicaUsage{
				CPUSeconds: 12.5, CPUCores: &cores, MemoryBytes: 64 << 20, MemoryPeakBytes: 80 << 20, Pids: 7}},
			{Stack: "web", Service: "api", Slot: 2, Instance: "web-api-2-cd34"},
		}
	}
	m := New(Options{Replicas: replicas, NoRuntimeCollectors: true})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	fams := scrape(t, srv.Client(), srv.URL+"/metrics")
	l := "instance=web-api-1-ab12,service=api,slot=1,stack=web"
	expect(t, fams, "engenho_replica_cpu_seconds_total", map[string]float64{l: 12.5})
	expect(t, fams, "engenho_replica_memory_bytes", map[string]float64{l: 64 << 20})
	expect(t, fams, "engenho_replica_memory_peak_bytes", map[string]float64{l: 80 << 20})
	expect(t, fams, "engenho_replica_pids", map[string]float64{l: 7})
	if f := fams["engenho_replica_cpu_seconds_total"]; f == nil || f.GetType() != dto.MetricType_COUNTER {
		t.Errorf("cpu seconds is not a counter: %v", f)
	}
}
