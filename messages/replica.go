package messages

import (
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/probe"
)

// ReplicaStatus is a replica actor's published snapshot (SUP-3, SVC-19).
// The replica sends it to its service on every change; status readers get
// the same value from the status board.
type ReplicaStatus struct {
	Stack      string `json:"stack"`
	Service    string `json:"service"`
	Slot       int    `json:"slot"`
	ID         string `json:"id"`
	Instance   string `json:"instance"`
	Revision   string `json:"revision"`
	Deployment string `json:"deployment"`
	// Phase is creating, starting, probing, serving, unhealthy, down,
	// stopping, stopped, failed, retiring, gone or adopting.
	Phase string `json:"phase"`
	// Health is none, starting, healthy or unhealthy (SVC-7).
	Health     string `json:"health"`
	InRotation bool   `json:"in_rotation"`
	// Addresses maps target ports to host addresses (a copy).
	Addresses    map[int]string `json:"addresses,omitempty"`
	CreatedAt    time.Time      `json:"created_at"`
	StartedAt    time.Time      `json:"started_at"`
	ServingSince time.Time      `json:"serving_since"`
	Restarts     int            `json:"restarts"`
	LastProbe    string         `json:"last_probe,omitempty"`
	LastError    string         `json:"last_error,omitempty"`
	// FailureOutput is the tail of the output of the last run that failed.
	FailureOutput string `json:"failure_output,omitempty"`
	// Ledger is the slot's backoff ledger entry, when it has history.
	Ledger    Ledger `json:"ledger"`
	HasLedger bool   `json:"has_ledger"`
	// Replace is set when the instance is gone or must be replaced (SVC-8,
	// SUP-15): the service fills the slot with a fresh instance.
	Replace bool `json:"replace,omitempty"`
	// Final is set on the last status of a replica actor that is ending.
	Final bool `json:"final,omitempty"`
	// Withdraw: the replica is about to restart or replace its instance
	// and waits for the service to withdraw it from the balancer first
	// (SVC-30); the service answers ReplicaWithdrawn.
	Withdraw bool `json:"withdraw,omitempty"`
	// Refused names the instance and the state recovery refuses to act on
	// (paused, unknown, none), while it is found so (SVC-32).
	Refused string `json:"refused,omitempty"`
	// RetireError is why retiring the instance failed (a driver error on
	// stop or delete), while it is retried (SVC-33).
	RetireError string `json:"retire_error,omitempty"`
	// Usage is the replica's last usage sample (DRV-16); the daemon adds
	// it to status, the replica actor never sets it.
	Usage *ReplicaUsage `json:"usage,omitempty"`
}

// Intent is what the service wants a replica to do.
type Intent string

const (
	IntentRun    Intent = "run"
	IntentStop   Intent = "stop"   // stop the instance, keep it (SVC-10)
	IntentRetire Intent = "retire" // stop and delete it, then end (SVC-16)
)

// ReplicaCommand tells a replica actor its intent.
type ReplicaCommand struct {
	Intent Intent
}

// ReplicaOp names a driver call a replica makes.
type ReplicaOp string

// ReplicaOpDone is a replica's own message: a driver call it started in a
// goroutine has ended (SUP-4).
type ReplicaOpDone struct {
	Op     ReplicaOp
	Err    error
	Status drivers.Status // for inspect
}

// ReplicaExited is a replica's own message: the driver's watch saw the
// instance's run end.
type ReplicaExited struct {
	Exit drivers.Exit
}

// ReplicaProbed is a replica's own message: one health probe ended.
type ReplicaProbed struct {
	Result probe.Result
}

// ReplicaOutput is a replica's own message: the tail of the output of a
// run that failed (SVC-21).
type ReplicaOutput struct {
	Output string
}
