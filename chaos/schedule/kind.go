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
	// PanicActivator panics a host node's activator: every host actor
	// under it is stopped and started again.
	PanicActivator Kind = "panic.activator"

	WorkloadKill  Kind = "workload.kill"
	IncusKillInit Kind = "incus.kill-init"
	// WorkloadStop SIGSTOPs a workload that has a probe: alive but hung,
	// its probe must catch it and its replica be restarted.
	WorkloadStop Kind = "workload.stop"
	// WorkloadOOM makes a replica with a memory limit allocate past it:
	// the kernel kills it, and it must come back with the reason
	// oom-killed (DRV-14).
	WorkloadOOM Kind = "workload.oom"

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
	// Compound is several faults at once (soak): 2-3 parts from different
	// families (a workload, a driver rule, a panic, the daemon itself),
	// injected one right after the other and recovered from together.
	Compound Kind = "compound"
	// DaemonStopAwake freezes (SIGSTOP) a host node's daemon while its
	// host is awake, for longer than the lease's TTL: the other node takes
	// the host over; thawed, the frozen one must fence itself (ACT-14).
	DaemonStopAwake Kind = "daemon.stop-awake"
	// ClockJump moves node a's wall clock (not its monotonic one) for a
	// while, a replica killed meanwhile: durations must not notice.
	ClockJump Kind = "clock.jump"
	// ClockJumpAwake moves a host node's wall clock one way and the other
	// node's the other way while the host is awake there (ACT-14).
	ClockJumpAwake Kind = "clock.jump-awake"
	// S3Error, S3Latency, S3Reset and S3Truncate act on the wire between
	// one node of the S3 pair and the S3 server (a fault proxy): 503
	// SlowDown or 500 answers, latency, connections reset mid-answer, GET
	// bodies cut short; then a request through that node.
	S3Error    Kind = "s3.error"
	S3Latency  Kind = "s3.latency"
	S3Reset    Kind = "s3.reset"
	S3Truncate Kind = "s3.truncate"
	// S3Partition cuts the node holding the lease off from S3 for longer
	// than the lease's TTL (soak): it must fence itself, the other node
	// takes over.
	S3Partition Kind = "s3.partition"
	// S3Restart restarts the S3 server itself while a request goes
	// through one node.
	S3Restart Kind = "s3.restart"
	// IncusAPIError and IncusAPISlow act on the wire between node a's
	// incus driver and incusd (a fault proxy): 500 answers, or latency;
	// then a box container's init is killed so recovery meets them.
	IncusAPIError Kind = "incus.api-error"
	IncusAPISlow  Kind = "incus.api-slow"
	// IncusRestart kills a box container's init and restarts incusd
	// right after (a clean stop, or SIGKILL).
	IncusRestart Kind = "incus.restart"
	// DiskFull fills node a's data disk to the last byte for a while (and
	// with kill=1 kills the daemon meanwhile): it keeps running what runs,
	// refuses intents saying so, and serves again once there is room.
	DiskFull Kind = "disk.full"
	// DiskEIO makes every write to node a's data disk fail with EIO for a
	// while (a FUSE file system under the data directory; with kill=1 the
	// daemon is also SIGKILLed at its end): it keeps running what runs,
	// refuses intents saying the disk failed, keeps a refused intent out
	// of force, and loses nothing it acknowledged.
	DiskEIO Kind = "disk.eio"
	// DiskTornState kills node a's daemon, tears one process instance's
	// state file in half and relaunches it (REL-5).
	DiskTornState Kind = "disk.torn-state"
	// DaemonStop SIGSTOPs node a's daemon for a few seconds, then
	// SIGCONTs it: the workloads run on untouched and it catches up.
	DaemonStop Kind = "daemon.stop"
	// DaemonFDLimit lowers node a's daemon's open-file limit to what it
	// holds plus a few, floods its socket, then restores the limit: it
	// never crashes, keeps its workloads, and serves again.
	DaemonFDLimit Kind = "daemon.fd-limit"

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
	NeedProcess   Need = "process"    // the process driver: always there
	NeedIncus     Need = "incus"      // a local incusd with the busybox image
	NeedHosts     Need = "hosts"      // a daemon that runs hibernating hosts
	NeedCgroups   Need = "cgroups"    // cgroups the process driver can make (memory limits)
	NeedDisk      Need = "disk"       // node a's data directory on a file system of its own
	NeedFaultFS   Need = "fuse"       // that file system behind a FUSE loopback that can fail writes
	NeedS3Restart Need = "s3-restart" // a command that restarts the S3 server (ENGENHO_S3_RESTART)
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
	PanicHost: NeedHosts, PanicSidecar: NeedHosts, PanicActivator: NeedHosts,
	WorkloadKill: NeedProcess, IncusKillInit: NeedIncus, WorkloadStop: NeedProcess, WorkloadOOM: NeedCgroups,
	DriverFail: NeedProcess, DriverTimeout: NeedProcess, DriverHang: NeedProcess,
	StoreError: NeedHosts, StoreLatency: NeedHosts, StoreConflict: NeedHosts, LeaseExpire: NeedHosts,
	DaemonKill: NeedProcess, DaemonKillRollout: NeedProcess, DaemonKillSleep: NeedHosts,
	DaemonKillAwake: NeedHosts, DaemonStopAwake: NeedHosts, Compound: NeedProcess, DiskFull: NeedDisk, DiskEIO: NeedFaultFS, DiskTornState: NeedProcess,
	ClockJump: NeedProcess, ClockJumpAwake: NeedHosts,
	S3Error: NeedHosts, S3Latency: NeedHosts, S3Reset: NeedHosts, S3Truncate: NeedHosts, S3Partition: NeedHosts,
	S3Restart: NeedS3Restart, IncusAPIError: NeedIncus, IncusAPISlow: NeedIncus, IncusRestart: NeedIncus, DaemonStop: NeedProcess, DaemonFDLimit: NeedProcess,
	ConfigTruncate: NeedProcess, ConfigHalf: NeedProcess,
	SocketGarbage: NeedProcess, SocketFlood: NeedProcess,
	JournalCorrupt: NeedProcess, JournalReadonly: NeedProcess,
}

// OnHostPair reports whether k is injected on a host pair's nodes rather
// than on node a.
func (k Kind) OnHostPair() bool { return needs[k] == NeedHosts || k == S3Restart }

// Needs is what k needs on the machine.
func (k Kind) Needs() Need { return needs[k] }

// Known reports whether k is a fault kind.
func (k Kind) Known() bool { _, ok := needs[k]; return ok }
