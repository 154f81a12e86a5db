package metrics

import (
	"strconv"
	"strings"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/messages"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	actorsDesc = prometheus.NewDesc(Namespace+"_actors",
		"Live actors by kind (root, stack, service, replica, host, ...) and state.", []string{"kind", "state"}, nil)
	actorRestartsDesc = prometheus.NewDesc(Namespace+"_actor_restarts",
		"Restarts of the live actors of each kind (an actor restart is not a workload restart, SUP-9).", []string{"kind"}, nil)
	servicesDesc = prometheus.NewDesc(Namespace+"_services",
		"Services by state (SVC-19).", []string{"state"}, nil)
	replicasDesc = prometheus.NewDesc(Namespace+"_service_replicas",
		"Replicas of a service: desired, running and healthy.", []string{"stack", "service", "state"}, nil)
	restartsDesc = prometheus.NewDesc(Namespace+"_service_restarts",
		"Workload restarts of the service's current replicas.", []string{"stack", "service"}, nil)
	ladderDesc = prometheus.NewDesc(Namespace+"_ladder_failures",
		"Consecutive failures charged on a slot's backoff ladder (SUP-10); only slots with history have a series.", []string{"stack", "service", "slot"}, nil)

	replicaLabels = []string{"stack", "service", "slot", "instance"}
	cpuDesc       = prometheus.NewDesc(Namespace+"_replica_cpu_seconds_total",
		"CPU time a running replica has used (DRV-16): its cgroup's since its last start after a stop (process), its container's since it started (incus).", replicaLabels, nil)
	memoryDesc = prometheus.NewDesc(Namespace+"_replica_memory_bytes",
		"Memory charged to a running replica now, as its limit counts it (page cache included).", replicaLabels, nil)
	memoryPeakDesc = prometheus.NewDesc(Namespace+"_replica_memory_peak_bytes",
		"The highest memory a running replica has had, over the same span as its CPU counter.", replicaLabels, nil)
	pidsDesc = prometheus.NewDesc(Namespace+"_replica_pids",
		"Processes (and threads, under cgroups) of a running replica.", replicaLabels, nil)
)

// snapshots turns the daemon's snapshots into gauges at scrape time.
type snapshots struct {
	actors   func() []supervise.Node
	services func() []messages.ServiceStatus
	replicas func() []messages.ReplicaStatus
}

func (s *snapshots) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{actorsDesc, actorRestartsDesc, servicesDesc, replicasDesc, restartsDesc, ladderDesc, cpuDesc, memoryDesc, memoryPeakDesc, pidsDesc} {
		ch <- d
	}
}

func (s *snapshots) Collect(ch chan<- prometheus.Metric) {
	if s.actors != nil {
		collectActors(ch, s.actors())
	}
	if s.services != nil {
		collectServices(ch, s.services())
	}
	if s.replicas != nil {
		collectUsage(ch, s.replicas())
	}
}

// collectUsage reports each running replica's last usage sample. A
// replica's series end with it: a replacement has another instance.
func collectUsage(ch chan<- prometheus.Metric, replicas []messages.ReplicaStatus) {
	for _, r := range replicas {
		u := r.Usage
		if u == nil {
			continue
		}
		l := []string{r.Stack, r.Service, strconv.Itoa(r.Slot), r.Instance}
		ch <- prometheus.MustNewConstMetric(cpuDesc, prometheus.CounterValue, u.CPUSeconds, l...)
		ch <- prometheus.MustNewConstMetric(memoryDesc, prometheus.GaugeValue, float64(u.MemoryBytes), l...)
		ch <- prometheus.MustNewConstMetric(memoryPeakDesc, prometheus.GaugeValue, float64(u.MemoryPeakBytes), l...)
		ch <- prometheus.MustNewConstMetric(pidsDesc, prometheus.GaugeValue, float64(u.Pids), l...)
	}
}

// ActorKind is the kind of the actor at path: its last segment's name
// before ':' (root/stack:web/service:api is a service; root is root).
func ActorKind(path string) string {
	last := path[strings.LastIndexByte(path, '/')+1:]
	kind, _, _ := strings.Cut(last, ":")
	if kind == "" {
		return "other"
	}
	return kind
}

func collectActors(ch chan<- prometheus.Metric, nodes []supervise.Node) {
	type kindState struct{ kind, state string }
	count := map[kindState]int{}
	restarts := map[string]int{}
	for _, n := range nodes {
		k := ActorKind(n.Path)
		count[kindState{k, n.State}]++
		restarts[k] += n.Restarts
	}
	for ks, n := range count {
		ch <- prometheus.MustNewConstMetric(actorsDesc, prometheus.GaugeValue, float64(n), ks.kind, ks.state)
	}
	for k, n := range restarts {
		ch <- prometheus.MustNewConstMetric(actorRestartsDesc, prometheus.GaugeValue, float64(n), k)
	}
}

func collectServices(ch chan<- prometheus.Metric, services []messages.ServiceStatus) {
	byState := map[messages.ServiceState]int{}
	type slotKey struct {
		stack, service string
		slot           int
	}
	ladder := map[slotKey]int{}
	for _, s := range services {
		byState[s.State]++
		ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(s.Desired), s.Stack, s.Service, "desired")
		ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(s.Running), s.Stack, s.Service, "running")
		ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(s.Healthy), s.Stack, s.Service, "healthy")
		restarts := 0
		for _, r := range s.Replicas {
			restarts += r.Restarts
			if r.HasLedger {
				// A slot may hold an old instance draining beside the new
				// one: report the higher position.
				k := slotKey{s.Stack, s.Service, r.Slot}
				ladder[k] = max(ladder[k], r.Ledger.Failures)
			}
		}
		ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.GaugeValue, float64(restarts), s.Stack, s.Service)
	}
	for st, n := range byState {
		ch <- prometheus.MustNewConstMetric(servicesDesc, prometheus.GaugeValue, float64(n), string(st))
	}
	for k, n := range ladder {
		ch <- prometheus.MustNewConstMetric(ladderDesc, prometheus.GaugeValue, float64(n), k.stack, k.service, strconv.Itoa(k.slot))
	}
}
