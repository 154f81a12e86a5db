package schedule

import "sort"

// Kind is a fault kind (CHS-2).
type Kind string

// The fault kinds.
const (
	PanicRoot    Kind = "panic.root"
	PanicStack   Kind = "panic.stack"
	PanicService Kind = "panic.service"
	PanicReplica Kind = "panic.replica"
	PanicHost    Kind = "panic.host"
	PanicSidecar Kind = "panic.sidecar"

	WorkloadKill  Kind = "workload.kill"
	IncusKillInit Kind = "incus.kill-init"

	DriverFail    Kind = "driver.fail"
	DriverTimeout Kind = "driver.timeout"
	DriverHang    Kind = "driver.hang"

	StoreError    Kind = "store.error"
	StoreLatency  Kind = "store.latency"
	StoreConflict Kind = "store.conflict"
	LeaseExpire   Kind = "lease.expire"

	DaemonKill        Kind = "daemon.kill"
	DaemonKillRollout Kind = "daemon.kill-rollout"
	DaemonKillSleep   Kind = "daemon.kill-sleep"
	// DaemonKillAwake SIGKILLs a node while its host is awake and being
	// written to (ACT-17): no final checkpoint, the other node takes over.
	DaemonKillAwake Kind = "daemon.kill-awake"

	ConfigTruncate Kind = "config.truncate"
	ConfigHalf     Kind = "config.half-written"

	SocketGarbage Kind = "socket.garbage"
	SocketFlood   Kind = "socket.flood"

	// JournalCorrupt damages node a's journal while its daemon is down
	// (REL-5); JournalReadonly makes the journal directory immutable.
	JournalCorrupt  Kind = "journal.corrupt"
	JournalReadonly Kind = "journal.readonly"
)

// Need is a component a fault kind needs on the machine.
type Need string

const (
	NeedProcess Need = "process" // the process driver: always there
	NeedIncus   Need = "incus"   // a local incusd with the busybox image
	NeedHosts   Need = "hosts"   // a daemon that runs hibernating hosts
)

// AllKinds lists every kind, sorted.
func AllKinds() []Kind {
	out := make([]Kind, 0, len(needs))
	for k := range needs {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

var needs = map[Kind]Need{
	PanicRoot: NeedProcess, PanicStack: NeedProcess, PanicService: NeedProcess, PanicReplica: NeedProcess,
	PanicHost: NeedHosts, PanicSidecar: NeedHosts,
	WorkloadKill: NeedProcess, IncusKillInit: NeedIncus,
	DriverFail: NeedProcess, DriverTimeout: NeedProcess, DriverHang: NeedProcess,
	StoreError: NeedHosts, StoreLatency: NeedHosts, StoreConflict: NeedHosts, LeaseExpire: NeedHosts,
	DaemonKill: NeedProcess, DaemonKillRollout: NeedProcess, DaemonKillSleep: NeedHosts,
	DaemonKillAwake: NeedHosts,
	ConfigTruncate:  NeedProcess, ConfigHalf: NeedProcess,
	SocketGarbage: NeedProcess, SocketFlood: NeedProcess,
	JournalCorrupt: NeedProcess, JournalReadonly: NeedProcess,
}

// Needs is what k needs on the machine.
func (k Kind) Needs() Need { return needs[k] }

// Known reports whether k is a fault kind.
func (k Kind) Known() bool { _, ok := needs[k]; return ok }
