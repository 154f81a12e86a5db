package stackfile

import "time"

// Defaults. Each names the rule it comes from; docs/stackfile.md lists them.
const (
	DefaultDriver          = "process"
	DefaultReplicas        = 1
	DefaultStopGrace       = 10 * time.Second // Compose's default
	DefaultHibernatedGrace = 20 * time.Second // ACT-8
	DefaultSidecarGrace    = 5 * time.Second  // ACT-8

	DefaultInterval      = 10 * time.Second
	DefaultTimeout       = 5 * time.Second
	DefaultRetries       = 3
	DefaultStartPeriod   = 0
	DefaultStartInterval = 2 * time.Second

	DefaultParallelism = 1               // SVC-12
	DefaultMonitor     = 5 * time.Second // SVC-13

	DefaultImmediate   = 3                // SUP-10
	DefaultBackoffCap  = 15 * time.Minute // SUP-10
	DefaultStable      = 5 * time.Minute  // SUP-11
	DefaultStepTimeout = 2 * time.Minute  // SVC-11
	DefaultUnhealthy   = 2                // SUP-14
	DefaultReplaceN    = 3                // SUP-15
	DefaultDrain       = 10 * time.Second // SVC-16
	DefaultAlertAfter  = 20 * time.Second // SVC-20

	DefaultIdle        = 15 * time.Minute // ACT intro
	DefaultReplication = ReplicationBatched
	DefaultWakeTimeout = 30 * time.Second // ACT-3

	DefaultSidecarInitial    = 2 * time.Second // ACT-11
	DefaultSidecarCap        = time.Minute     // ACT-11
	DefaultSidecarResetAfter = time.Minute     // ACT-11
)

// DefaultDelays is the ladder after the immediate retries (SUP-10).
func DefaultDelays() []time.Duration {
	return []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute}
}

// NewService returns a service named name with every default applied and
// nothing to run; Parse starts from it, and code that builds stacks
// (tests, the fake driver's benchmarks) can too.
func NewService(name string) Service {
	return Service{
		Name:            name,
		Healthcheck:     defaultHealthcheck(),
		Deploy:          defaultDeploy(),
		Driver:          DefaultDriver,
		StopGracePeriod: DefaultStopGrace,
		Engenho:         defaultEngenho(),
	}
}

func defaultHealthcheck() Healthcheck {
	return Healthcheck{
		Kind:          ProbeNone,
		Interval:      DefaultInterval,
		Timeout:       DefaultTimeout,
		Retries:       DefaultRetries,
		StartPeriod:   DefaultStartPeriod,
		StartInterval: DefaultStartInterval,
	}
}

func defaultDeploy() Deploy {
	return Deploy{
		Replicas:      DefaultReplicas,
		RestartPolicy: RestartPolicy{Condition: RestartAny},
		UpdateConfig: UpdateConfig{
			Parallelism:   DefaultParallelism,
			Order:         OrderStopFirst,
			FailureAction: FailurePause,
			Monitor:       DefaultMonitor,
		},
	}
}

func defaultEngenho() Engenho {
	return Engenho{
		Backoff: Backoff{
			Immediate: DefaultImmediate,
			Delays:    DefaultDelays(),
			Cap:       DefaultBackoffCap,
		},
		Stable:                DefaultStable,
		StepTimeout:           DefaultStepTimeout,
		UnhealthyThreshold:    DefaultUnhealthy,
		RestartsBeforeReplace: DefaultReplaceN,
		Drain:                 DefaultDrain,
		UnhealthyEventAfter:   DefaultAlertAfter,
		Secrets:               SecretsPolicy{OnChange: OnChangeRestart},
	}
}

func defaultHibernate() Hibernate {
	return Hibernate{
		Idle:        DefaultIdle,
		Replication: DefaultReplication,
		WakeTimeout: DefaultWakeTimeout,
	}
}

func defaultSidecar() Sidecar {
	return Sidecar{
		StopGracePeriod: DefaultSidecarGrace,
		Backoff: SidecarBackoff{
			Initial:    DefaultSidecarInitial,
			Cap:        DefaultSidecarCap,
			ResetAfter: DefaultSidecarResetAfter,
		},
	}
}
