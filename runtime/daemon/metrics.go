package daemon

import (
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/metrics"
)

// startMetrics serves Prometheus metrics when metrics.listen is set
// (DMN-19). The endpoint lives as long as the process; a scrape reads
// published snapshots only.
func (d *Daemon) startMetrics() error {
	addr := d.settings.MetricsListen
	d.metrics = metrics.New(metrics.Options{Version: Version, Actors: d.actorNodes, Services: d.serviceStatuses, Replicas: d.replicaUsage})
	if addr == "" {
		return nil
	}
	if err := d.metrics.Serve(addr); err != nil {
		return err
	}
	d.log.Info().Str("listen", addr).Msg("metrics listening")
	return nil
}

func (d *Daemon) stopMetrics() {
	if d.metrics != nil {
		_ = d.metrics.Close()
	}
}

func (d *Daemon) actorNodes() []supervise.Node {
	if rt := d.rt.Load(); rt != nil {
		return rt.sys.Tree.Snapshot()
	}
	return nil
}

func (d *Daemon) serviceStatuses() []messages.ServiceStatus {
	if rt := d.rt.Load(); rt != nil {
		return rt.board.Services("")
	}
	return nil
}

// replicaUsage is every sampled replica with its last usage (DRV-16).
func (d *Daemon) replicaUsage() []messages.ReplicaStatus {
	rt := d.rt.Load()
	if rt == nil || rt.usage == nil {
		return nil
	}
	all := rt.usage.All()
	out := make([]messages.ReplicaStatus, len(all))
	for i, r := range all {
		u := r.Usage
		out[i] = messages.ReplicaStatus{Stack: r.Stack, Service: r.Service, Slot: r.Slot, Instance: r.Instance, Usage: &u}
	}
	return out
}

// countEvent feeds the metrics that events carry.
func (d *Daemon) countEvent(ev messages.Event) {
	switch ev.Kind {
	case messages.KindRolloutStarted:
		d.metrics.RolloutEvent(ev.Stack, ev.Service, metrics.RolloutStarted)
	case messages.KindDeploySucceeded:
		d.metrics.RolloutEvent(ev.Stack, ev.Service, metrics.RolloutSucceeded)
	case messages.KindDeployFailed:
		d.metrics.RolloutEvent(ev.Stack, ev.Service, metrics.RolloutFailed)
	case messages.KindRolloutRolledBack:
		d.metrics.RolloutEvent(ev.Stack, ev.Service, metrics.RolloutRolledBack)
	}
}
