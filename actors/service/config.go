package service

import (
	"time"

	"github.com/engenho/engenho/actors/replica"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
)

// targetOf is the planner's view of one deployment of the service.
func targetOf(r messages.ServiceRevision) Target {
	svc := r.Definition
	u := svc.Deploy.UpdateConfig
	return Target{
		Deployment: r.Deployment,
		Revision:   r.Revision,
		Replicas:   svc.Deploy.Replicas,
		Update: Update{Parallelism: u.Parallelism, Delay: u.Delay, Order: u.Order,
			FailureAction: u.FailureAction, Monitor: u.Monitor, Strategy: svc.Strategy()},
		Deadline:  svc.Healthcheck.Deadline(),
		Immediate: svc.Engenho.Backoff.Immediate,
	}
}

// coreConfig is the core's config from the service's latest definition.
func coreConfig(svc stackfile.Service) Config {
	return Config{UnhealthyAfter: svc.Engenho.UnhealthyEventAfter, DependsOn: svc.DependsOn}
}

// replicaConfig is what every replica of svc is configured with.
func replicaConfig(svc stackfile.Service, env Env) replica.Config {
	rp := svc.Deploy.RestartPolicy
	return replica.Config{
		Probe:  svc.ProbeConfig(),
		Ladder: ladder.OfService(svc.Engenho),
		Policy: replica.Policy{
			Condition: rp.Condition, MaxAttempts: rp.MaxAttempts, Window: rp.Window, Delay: rp.Delay,
			UnhealthyThreshold:    svc.Engenho.UnhealthyThreshold,
			RestartsBeforeReplace: svc.Engenho.RestartsBeforeReplace,
			StopGrace:             svc.StopGracePeriod,
			Sweep:                 env.Sweep,
			ListSwept:             true, // the service sweeps (sweep.go)
			TransientRetry:        5 * time.Second,
			FailClosed:            true, // SVC-30..SVC-33
			NoRotation:            len(svc.Ports) == 0,
		},
	}
}
