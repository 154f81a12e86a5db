package messages

import (
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
)

// ServiceState is a service's state (SVC-19).
type ServiceState string

const (
	ServiceStarting  ServiceState = "starting"
	ServiceConverged ServiceState = "converged"
	ServiceUpdating  ServiceState = "updating"
	ServicePaused    ServiceState = "paused"
	ServiceWaiting   ServiceState = "waiting"
	ServiceFailing   ServiceState = "failing"
	// ServiceBackoff: a slot is down and its ladder puts the next attempt
	// later (SUP-10); NextAttempt says when.
	ServiceBackoff ServiceState = "backoff"
)

// ServiceStatus is a service actor's published snapshot (SVC-19).
type ServiceStatus struct {
	Stack      string       `json:"stack"`
	Service    string       `json:"service"`
	State      ServiceState `json:"state"`
	Message    string       `json:"message,omitempty"`
	Revision   string       `json:"revision"`
	Deployment string       `json:"deployment"`
	Driver     string       `json:"driver"`
	Desired    int          `json:"desired"`
	Running    int          `json:"running"`
	Healthy    int          `json:"healthy"`
	Stopped    bool         `json:"stopped,omitempty"`
	// Reason is why the slot the state is about last failed (an exit code
	// or signal, the probe's output, a driver error), while one fails or
	// backs off; NextAttempt is when that slot starts again, while it backs
	// off (SVC-19, SUP-18).
	Reason      string     `json:"reason,omitempty"`
	NextAttempt *time.Time `json:"next_attempt,omitempty"`
	// Rollout is the rollout slot by slot while one runs.
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// FailureOutput is the output of the last replica that failed to come
	// up, kept while the service is not converged (SVC-21).
	FailureOutput string          `json:"failure_output,omitempty"`
	Ports         []PortStatus    `json:"ports,omitempty"`
	Replicas      []ReplicaStatus `json:"replicas,omitempty"`
	UpdatedAt     time.Time       `json:"updated_at"`
	// Overrides are the values operators' commands hold instead of the
	// stack file's (SVC-23); the daemon adds them to the board's copy.
	Overrides []Override `json:"overrides,omitempty"`
	// StaleSecrets name the secrets that changed under
	// x-engenho.secrets.on_change none while an instance that still runs
	// was running: it has the old value; the daemon adds them.
	StaleSecrets []string `json:"stale_secrets,omitempty"`
	// Inhibited is why the service is publication-inhibited (a withdrawal
	// the balancer refused), empty when it is not (SVC-30).
	Inhibited string `json:"publication_inhibited,omitempty"`
	// RetirementPending names the instances whose retirement failed and
	// is retried; their slots publish nothing new until they are gone
	// (SVC-33).
	RetirementPending []string `json:"retirement_pending,omitempty"`
	// Refused are the instances recovery refuses to touch, each with its
	// state (SVC-32).
	Refused []string `json:"refused,omitempty"`
}

// RolloutStatus shows a rollout slot by slot (SVC-19).
type RolloutStatus struct {
	Deployment string       `json:"deployment"`
	Revision   string       `json:"revision"`
	From       string       `json:"from_revision,omitempty"`
	Order      string       `json:"order"`
	Slots      []SlotStatus `json:"slots"`
	Paused     bool         `json:"paused,omitempty"`
	Message    string       `json:"message,omitempty"`
	// Strategy is "recreate" for a rollout that replaces every instance
	// at once (SVC-25); empty for a rolling one.
	Strategy string `json:"strategy,omitempty"`
}

// SlotStatus is one slot of a rollout.
type SlotStatus struct {
	Slot  int    `json:"slot"`
	State string `json:"state"` // pending, updating, monitoring, done, failed
}

// PortStatus is one published port (SVC-22).
type PortStatus struct {
	Listen   string   `json:"listen"`
	Target   int      `json:"target"`
	Backends []string `json:"backends"`
	Accepted uint64   `json:"accepted"`
	Active   int64    `json:"active"`
	Rate     float64  `json:"rate"`
}

// StackStatus is a stack actor's published snapshot.
type StackStatus struct {
	Stack      string    `json:"stack"`
	Deployment string    `json:"deployment"`
	Converged  bool      `json:"converged"`
	Services   []string  `json:"services"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// ServiceRevision is one deployment of a service's definition.
type ServiceRevision struct {
	Deployment string
	// Revision is the effective revision: the definition's hash, plus a
	// redeploy count when the operator asked to replace every instance.
	Revision   string
	Definition stackfile.Service
}

// ServiceDefinition gives a service actor its current definition and the
// previous one (for rollback). The definition is immutable once parsed;
// the message carries it by value.
type ServiceDefinition struct {
	Stack    string
	Current  ServiceRevision
	Previous *ServiceRevision
}

// ServiceIntent sets or lifts the durable stopped intent (SVC-10).
type ServiceIntent struct {
	Stopped bool
}

// ServiceRetry clears the service's backoff so the next pass makes a fresh
// attempt (SUP-17).
type ServiceRetry struct{}

// ServiceRemove retires every instance of the service; the actor then
// ends normally.
type ServiceRemove struct{}

// DependencyStatus tells a service how one of its dependencies is doing
// (SVC-18).
type DependencyStatus struct {
	Service string
	Running int
	Healthy int
}

// ServiceSummary is what a service tells its stack after each change.
type ServiceSummary struct {
	Service string
	State   ServiceState
	Running int
	Healthy int
	Desired int
	Gone    bool // the service has retired everything and ends
}

// ServicePlan is a service's own message: plan again, once, after the
// messages that are queued now (it coalesces bursts of replica reports).
type ServicePlan struct{}

// ServiceListed is a service's own message: the driver listed the
// instances that carry the service's labels (adoption, SUP-9; Sweep: the
// periodic sweep, SVC-8, SVC-9).
type ServiceListed struct {
	Instances []drivers.Status
	Err       error
	Sweep     bool
}

// ServiceDrained is a service's own message: replica ID has no more
// connections through the balancer and may be stopped (SVC-16).
type ServiceDrained struct{ ID string }

// ReplicaRetry clears a replica's backoff and spent restart policy.
type ReplicaRetry struct{}

// ReplicaSweep asks a replica to inspect its instance now: the service's
// sweep listed it changed or missing (SVC-8, SVC-9).
type ReplicaSweep struct{}
