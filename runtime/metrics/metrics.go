package metrics

import (
	"time"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/messages"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every engenho metric.
const Namespace = "engenho"

// Options say where the scrape-time snapshots come from. A nil function
// leaves its metrics out.
type Options struct {
	// Actors returns the live supervision tree (supervise.Tree.Snapshot).
	Actors func() []supervise.Node
	// Services returns every service's published status, replicas
	// included.
	Services func() []messages.ServiceStatus
	// Replicas returns the running replicas with their last usage sample
	// (Usage set), for the engenho_replica_* metrics (DRV-16).
	Replicas func() []messages.ReplicaStatus
	// Version is reported as engenho_build_info{version}.
	Version string
	// NoRuntimeCollectors leaves out the Go runtime and process metrics
	// (go_*, process_*); tests use it to keep output small.
	NoRuntimeCollectors bool
}

// Metrics holds the daemon's metrics. Create it with New; the zero value
// is not usable, but a nil *Metrics is (every method does nothing).
type Metrics struct {
	reg *prometheus.Registry

	journalWrite *prometheus.HistogramVec
	leaseOps     *prometheus.CounterVec
	wakes        *prometheus.CounterVec
	wakeDuration prometheus.Histogram
	wakeSteps    *prometheus.HistogramVec
	rollouts     *prometheus.CounterVec

	server
}

// New builds the metrics on a private registry.
func New(o Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.journalWrite = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "journal_write_seconds",
		Help:    "Latency of journal writes: synced intents, and batched appends.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15), // 100µs .. 1.6s
	}, []string{"kind"})
	m.leaseOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "lease_operations_total",
		Help: "Host lease operations (ACT-5) by operation and outcome.",
	}, []string{"op", "outcome"})
	m.wakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "wakes_total",
		Help: "Wakes of hibernating hosts (ACT-3, ACT-4) by outcome.",
	}, []string{"outcome"})
	m.wakeDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "wake_seconds",
		Help:    "Duration of a whole wake, from the first request to serving.",
		Buckets: wakeBuckets,
	})
	m.wakeSteps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "wake_step_seconds",
		Help:    "Duration of each step of a wake (ACT-4).",
		Buckets: wakeBuckets,
	}, []string{"step"})
	m.rollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "rollouts_total",
		Help: "Rollouts by stack, service and event: started, succeeded, failed, rolled_back.",
	}, []string{"stack", "service", "event"})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info", Help: "Always 1; the version of the running daemon.",
	}, []string{"version"})
	version := o.Version
	if version == "" {
		version = "dev"
	}
	build.WithLabelValues(version).Set(1)
	m.reg.MustRegister(m.journalWrite, m.leaseOps, m.wakes, m.wakeDuration, m.wakeSteps, m.rollouts, build,
		&snapshots{actors: o.Actors, services: o.Services, replicas: o.Replicas})
	if !o.NoRuntimeCollectors {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

var wakeBuckets = prometheus.ExponentialBuckets(0.001, 2, 16) // 1ms .. 33s

// Registry is the private registry, for a caller that adds its own
// collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Journal write kinds.
const (
	// JournalIntent is a synced write recording an intent (DMN-10).
	JournalIntent = "intent"
	// JournalEvents is a batched append of events.
	JournalEvents = "events"
)

// ObserveJournalWrite records one journal write of kind (JournalIntent or
// JournalEvents) that took d.
func (m *Metrics) ObserveJournalWrite(kind string, d time.Duration) {
	if m == nil {
		return
	}
	m.journalWrite.WithLabelValues(bounded(kind, JournalIntent, JournalEvents)).Observe(d.Seconds())
}

// Lease operations and outcomes (ACT-5).
const (
	LeaseAcquire  = "acquire"
	LeaseTakeover = "takeover" // an expired lease taken over
	LeaseRenew    = "renew"
	LeaseRelease  = "release"

	OutcomeOK       = "ok"
	OutcomeHeld     = "held"     // held by another node
	OutcomeConflict = "conflict" // a conditional write lost a race
	OutcomeLost     = "lost"     // a renew found the lease gone
	OutcomeError    = "error"    // the store failed
)

// LeaseOp counts one lease operation and its outcome.
func (m *Metrics) LeaseOp(op, outcome string) {
	if m == nil {
		return
	}
	m.leaseOps.WithLabelValues(
		bounded(op, LeaseAcquire, LeaseTakeover, LeaseRenew, LeaseRelease),
		bounded(outcome, OutcomeOK, OutcomeHeld, OutcomeConflict, OutcomeLost, OutcomeError),
	).Inc()
}

// Wake steps, in the order of ACT-4.
const (
	StepDefinition = "definition" // re-read the committed definition
	StepLease      = "lease"
	StepRestore    = "restore"
	StepSeed       = "seed" // a fresh first boot's seed command
	StepStart      = "start"
	StepReady      = "ready"
	StepSidecars   = "sidecars"
)

// WakeStep records how long one step of a wake took.
func (m *Metrics) WakeStep(step string, d time.Duration) {
	if m == nil {
		return
	}
	m.wakeSteps.WithLabelValues(bounded(step, StepDefinition, StepLease, StepRestore, StepSeed, StepStart, StepReady, StepSidecars)).Observe(d.Seconds())
}

// Wake outcomes.
const (
	WakeOK     = "ok"
	WakeFailed = "failed"
	WakeHeld   = "held" // the lease is held by another node
)

// Wake counts one finished wake; a successful one also records its total
// duration.
func (m *Metrics) Wake(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	outcome = bounded(outcome, WakeOK, WakeFailed, WakeHeld)
	m.wakes.WithLabelValues(outcome).Inc()
	if outcome == WakeOK {
		m.wakeDuration.Observe(d.Seconds())
	}
}

// Rollout events.
const (
	RolloutStarted    = "started"
	RolloutSucceeded  = "succeeded"
	RolloutFailed     = "failed"
	RolloutRolledBack = "rolled_back"
)

// RolloutEvent counts a rollout event of stack/service.
func (m *Metrics) RolloutEvent(stack, service, event string) {
	if m == nil {
		return
	}
	m.rollouts.WithLabelValues(stack, service, bounded(event, RolloutStarted, RolloutSucceeded, RolloutFailed, RolloutRolledBack)).Inc()
}

// ForgetService drops the counters of a removed service, so series of
// services that no longer exist do not pile up.
func (m *Metrics) ForgetService(stack, service string) {
	if m == nil {
		return
	}
	m.rollouts.DeletePartialMatch(prometheus.Labels{"stack": stack, "service": service})
}

// bounded returns v when it is one of allowed, else "other": a label
// never takes a value outside a known set.
func bounded(v string, allowed ...string) string {
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	return "other"
}
