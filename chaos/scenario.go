package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/engenho/engenho/chaos/inject"
	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/schedule"
)

// Scenario is a named campaign shape: which faults, how often an intent
// precedes one, and, for the self-test, which bug is planted.
type Scenario struct {
	Name string
	Doc  string
	Mix  schedule.Mix
	// IntentEvery is the percent chance of an operator intent before a
	// fault (see schedule.Plan).
	IntentEvery int
	// Plant is the planted bug of a self-test scenario.
	Plant inject.Plant
	// Expect lists the invariants a self-test scenario must see broken.
	Expect []string
	// MaxBound, when set, caps every recovery bound (a self-test does
	// not need minutes to see its bug).
	MaxBound time.Duration
	// NoHosts runs no host pairs (a self-test of the replicated path).
	NoHosts bool
	// StopAtFirst ends the campaign at the first fault with a violation
	// instead of healing the node and going on.
	StopAtFirst bool
	// Replication is the host pairs' replication class (ACT-9); stream
	// when empty.
	Replication string
}

// boundOf is the recovery bound of kind k in this scenario.
func (s Scenario) boundOf(k schedule.Kind) time.Duration {
	b := bound(k)
	if s.MaxBound > 0 {
		b = min(b, s.MaxBound)
	}
	return b
}

// fullMix weighs every kind; kinds the machine cannot run are left out
// when the schedule is drawn.
var fullMix = schedule.Mix{
	schedule.PanicRoot: 3, schedule.PanicStack: 4, schedule.PanicService: 8, schedule.PanicReplica: 12,
	schedule.PanicHost: 3, schedule.PanicSidecar: 2, schedule.PanicActivator: 2,
	schedule.WorkloadKill: 14, schedule.IncusKillInit: 4, schedule.WorkloadStop: 2, schedule.WorkloadOOM: 2,
	schedule.DriverFail: 7, schedule.DriverTimeout: 2, schedule.DriverHang: 1,
	schedule.StoreError: 2, schedule.StoreLatency: 2, schedule.StoreConflict: 2, schedule.LeaseExpire: 1,
	schedule.DaemonKill: 8, schedule.DaemonKillRollout: 4, schedule.DaemonKillSleep: 1,
	schedule.DaemonKillAwake: 1, schedule.DaemonStop: 3, schedule.DaemonFDLimit: 2, schedule.DiskFull: 2, schedule.DiskEIO: 2, schedule.DiskTornState: 1,
	schedule.ClockJump: 2, schedule.ClockJumpAwake: 2,
	schedule.S3Error: 2, schedule.S3Latency: 1, schedule.S3Reset: 2, schedule.S3Truncate: 2, schedule.S3Restart: 1,
	schedule.IncusAPIError: 2, schedule.IncusAPISlow: 1, schedule.IncusRestart: 1,
	schedule.ConfigTruncate: 3, schedule.ConfigHalf: 3,
	schedule.SocketGarbage: 4, schedule.SocketFlood: 2,
	schedule.JournalCorrupt: 2, schedule.JournalReadonly: 1,
}

// soakMix gives the slow faults (hangs, lease expiry, a daemon killed
// mid-sleep, all bounded by a lease TTL or a step timeout) more room.
var soakMix = func() schedule.Mix {
	m := schedule.Mix{}
	for k, w := range fullMix {
		m[k] = w
	}
	m[schedule.DriverHang], m[schedule.LeaseExpire], m[schedule.DaemonKillSleep], m[schedule.DaemonKillAwake] = 4, 4, 4, 4
	m[schedule.DriverTimeout] = 3
	m[schedule.StoreError], m[schedule.StoreConflict] = 4, 4
	m[schedule.DaemonStopAwake] = 3 // a lease TTL (30s) each: soak only
	m[schedule.Compound] = 8        // several faults at once (REL-4)
	m[schedule.S3Partition] = 3     // a lease TTL each: soak only
	return m
}()

var scenarios = map[string]Scenario{
	"ci":    {Name: "ci", Doc: "the CI campaign: every fault kind the machine can run", Mix: fullMix, IntentEvery: 20},
	"soak":  {Name: "soak", Doc: "a long campaign: the soak mix (the slow faults weighed up), more intents", Mix: soakMix, IntentEvery: 35},
	"smoke": {Name: "smoke", Doc: "a short mix for the integration test", Mix: fullMix, IntentEvery: 25},
	"journal": {Name: "journal", Doc: "journal faults only: damaged and read-only journals, each recovered as an operator would",
		Mix: schedule.Mix{schedule.JournalCorrupt: 3, schedule.JournalReadonly: 1}, NoHosts: true},
	"replication": {Name: "replication", Doc: "nodes killed while their host is awake and written to: the loss window measured (ACT-17)",
		Mix: schedule.Mix{schedule.DaemonKillAwake: 1}},
	"replication-batched": {Name: "replication-batched", Doc: "the replication scenario with the hosts in the batched class (a checkpoint every 5m while awake)",
		Mix: schedule.Mix{schedule.DaemonKillAwake: 1}, Replication: "batched"},
	"replication-daily": {Name: "replication-daily", Doc: "the replication scenario with the hosts in the daily class (at wake and every 24h)",
		Mix: schedule.Mix{schedule.DaemonKillAwake: 1}, Replication: "daily"},
	"rollout": {Name: "rollout", Doc: "daemon kills at rollout points only, to replay a rollout that pauses after one",
		Mix: schedule.Mix{schedule.DaemonKillRollout: 1}, NoHosts: true},
	"selftest-adopt": {Name: "selftest-adopt", Doc: "self-test: a daemon that forgets to re-adopt after a restart must be caught",
		Mix: schedule.Mix{schedule.DaemonKill: 1}, Plant: inject.PlantForgetAdopt,
		Expect: []string{"one-per-slot"}, MaxBound: 15 * time.Second, StopAtFirst: true, NoHosts: true},
	"selftest-journal": {Name: "selftest-journal", Doc: "self-test: a daemon that opens a damaged journal unchecked must be caught",
		Mix: schedule.Mix{schedule.JournalCorrupt: 1}, Plant: inject.PlantSkipJournalCheck,
		Expect: []string{"operator-told"}, MaxBound: 15 * time.Second, StopAtFirst: true, NoHosts: true},
	"selftest-exit": {Name: "selftest-exit", Doc: "self-test: a daemon that never learns a workload died (it goes on calling it serving) must be caught",
		Mix: schedule.Mix{schedule.WorkloadKill: 1}, Plant: inject.PlantHideExit + ":jobs-worker-",
		Expect: []string{invariant.ServingIsRunning}, MaxBound: 20 * time.Second, StopAtFirst: true, NoHosts: true},
	"selftest-panic": {Name: "selftest-panic", Doc: "self-test: a daemon whose actors drop injected panics (a fault with no effect) must be caught",
		Mix: schedule.Mix{schedule.PanicService: 1, schedule.PanicReplica: 1}, Plant: inject.PlantDropPanic,
		Expect: []string{invariant.FaultEffect}, MaxBound: 15 * time.Second, StopAtFirst: true, NoHosts: true},
	"selftest-eio": {Name: "selftest-eio", Doc: "self-test: a journal that keeps a write the disk failed (a refused intent comes into force) must be caught",
		Mix: schedule.Mix{schedule.DiskEIO: 1}, Plant: inject.PlantKeepFailedWrite,
		Expect: []string{invariant.Converged}, MaxBound: 15 * time.Second, StopAtFirst: true, NoHosts: true},
	"selftest-stop": {Name: "selftest-stop", Doc: "self-test: a daemon whose stop does nothing must be caught",
		Mix: schedule.Mix{schedule.WorkloadKill: 1}, IntentEvery: 100, Plant: inject.PlantStopNoop + ":jobs-worker-",
		Expect: []string{"stopped-intent"}, MaxBound: 15 * time.Second, StopAtFirst: true, NoHosts: true},
}

// only keeps of sc's mix the kinds named (engenho chaos run --kinds), each
// with its weight (1 when the scenario does not weigh it).
func (sc Scenario) only(kinds []string) (Scenario, error) {
	if len(kinds) == 0 {
		return sc, nil
	}
	mix := schedule.Mix{}
	for _, name := range kinds {
		k := schedule.Kind(name)
		if !k.Known() {
			return sc, fmt.Errorf("kind %q: want one of %v", name, schedule.AllKinds())
		}
		mix[k] = max(1, sc.Mix[k])
	}
	sc.Mix = mix
	return sc, nil
}

// LookupScenario finds a scenario by name.
func LookupScenario(name string) (Scenario, error) {
	s, ok := scenarios[name]
	if !ok {
		return Scenario{}, fmt.Errorf("scenario %q: want one of %v", name, ScenarioNames())
	}
	return s, nil
}

// ScenarioNames lists the scenarios, sorted.
func ScenarioNames() []string {
	var out []string
	for n := range scenarios {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// bound is a fault kind's recovery bound: generous limits, not
// performance targets (CHS-3).
func bound(k schedule.Kind) time.Duration {
	switch k {
	case schedule.DaemonKill, schedule.DaemonKillRollout, schedule.DaemonKillSleep, schedule.DaemonKillAwake, schedule.DaemonStopAwake, schedule.DiskFull, schedule.DiskEIO, schedule.DiskTornState, schedule.S3Partition, schedule.S3Restart,
		schedule.ConfigTruncate, schedule.ConfigHalf,
		schedule.JournalCorrupt, schedule.JournalReadonly:
		return 2 * time.Minute
	case schedule.IncusKillInit, schedule.DriverHang, schedule.DriverTimeout, schedule.DriverFail, schedule.Compound,
		schedule.IncusAPIError, schedule.IncusAPISlow, schedule.IncusRestart:
		return 2 * time.Minute
	case schedule.PanicRoot:
		return 90 * time.Second
	}
	return time.Minute
}
