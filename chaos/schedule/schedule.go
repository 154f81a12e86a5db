package schedule

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Mix weighs the kinds a scenario draws from; a kind with weight 0 or
// missing is never drawn.
type Mix map[Kind]int

// Target is a service faults and intents may aim at.
type Target struct {
	// Service is "stack/service".
	Service string
	// Driver is what runs it: "process", "incus" or "host" (hibernating).
	Driver string
	// MinReplicas..MaxReplicas is the range intents scale it in; equal
	// values (or zero) mean it is never scaled.
	MinReplicas, MaxReplicas int
	// Stoppable services get stop and start intents.
	Stoppable bool
	// Rollout services are redeployed (daemon.kill-rollout).
	Rollout bool
	// Probe: the service has a healthcheck that fails when its workload
	// hangs (workload.stop aims only at those).
	Probe bool
	// MemoryLimit: the service has a memory limit and an endpoint that
	// allocates (workload.oom).
	MemoryLimit bool
	// S3: a host pair on the S3 store, behind fault proxies (s3.*).
	S3 bool
}

// Stack is the stack part of Service.
func (t Target) Stack() string {
	stack, _, _ := strings.Cut(t.Service, "/")
	return stack
}

// Plan is what a schedule is drawn from.
type Plan struct {
	Seed   uint64
	Faults int
	Mix    Mix
	// Available says which components the machine has; NeedProcess is
	// always available.
	Available map[Need]bool
	Targets   []Target
	// IntentEvery is the chance, in percent, that a fault other than a
	// daemon kill is preceded by an operator intent.
	IntentEvery int
}

// Intent is an operator request the campaign makes just before a fault,
// so faults meet services mid-change and stopped intents (SVC-10).
type Intent struct {
	Op       string `json:"op"` // scale, stop, start
	Service  string `json:"service"`
	Replicas int    `json:"replicas,omitempty"`
}

func (in Intent) String() string {
	if in.Op == "scale" {
		return fmt.Sprintf("scale %s %d", in.Service, in.Replicas)
	}
	return in.Op + " " + in.Service
}

// Fault is one scheduled fault.
type Fault struct {
	Seq  int  `json:"seq"`
	Kind Kind `json:"kind"`
	// Service is the service aimed at, "stack/service"; empty for faults
	// aimed at the daemon itself.
	Service string `json:"service,omitempty"`
	// Pick chooses among the live candidates (replicas, actors, hosts)
	// when the fault is injected: candidate Pick mod len(candidates).
	Pick   uint32            `json:"pick"`
	Params map[string]string `json:"params,omitempty"`
	// Intents run, in order, just before the fault.
	Intents []Intent `json:"intents,omitempty"`
	// Parts are the faults of a compound (several at once): injected one
	// right after the other, in order, and recovered from together.
	Parts []Fault `json:"parts,omitempty"`
}

// Param returns a parameter as an int (0 when absent or not a number).
func (f Fault) Param(key string) int {
	n, _ := strconv.Atoi(f.Params[key])
	return n
}

// String is the fault's line in a printed schedule.
func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%4d %-20s", f.Seq, f.Kind)
	if f.Service != "" {
		fmt.Fprintf(&b, " %s", f.Service)
	}
	fmt.Fprintf(&b, " pick=%d", f.Pick)
	keys := make([]string, 0, len(f.Params))
	for k := range f.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, f.Params[k])
	}
	for _, in := range f.Intents {
		fmt.Fprintf(&b, " [%s]", in)
	}
	for _, part := range f.Parts {
		fmt.Fprintf(&b, " {%s}", strings.Join(strings.Fields(part.String())[1:], " "))
	}
	return b.String()
}

// Kinds lists the kinds a plan can draw: weighted, known and available,
// sorted.
func (p Plan) Kinds() []Kind {
	var out []Kind
	for _, k := range AllKinds() {
		if p.Mix[k] > 0 && p.available(k) && len(p.targetsFor(k)) > 0 {
			out = append(out, k)
		}
	}
	return out
}

func (p Plan) available(k Kind) bool {
	n := k.Needs()
	return n == NeedProcess || p.Available[n]
}

// targetsFor lists the services kind k may aim at; a kind aimed at the
// daemon gets one empty target.
func (p Plan) targetsFor(k Kind) []Target {
	var want func(Target) bool
	switch k {
	case PanicRoot, DaemonKill, ConfigTruncate, ConfigHalf, SocketGarbage, SocketFlood, JournalCorrupt, JournalReadonly,
		DaemonStop, DaemonFDLimit, Compound, DiskFull, DiskEIO:
		return []Target{{}}
	case PanicStack, PanicService, PanicReplica:
		want = func(t Target) bool { return t.Driver != "host" }
	case WorkloadKill, DriverHang, DiskTornState, ClockJump:
		want = func(t Target) bool { return t.Driver == "process" }
	case DriverFail, DriverTimeout:
		want = func(t Target) bool { return t.Driver == "process" || t.Driver == "incus" }
	case WorkloadStop:
		want = func(t Target) bool { return t.Driver == "process" && t.Probe }
	case WorkloadOOM:
		want = func(t Target) bool { return t.Driver == "process" && t.MemoryLimit }
	case IncusKillInit, IncusAPIError, IncusAPISlow, IncusRestart:
		want = func(t Target) bool { return t.Driver == "incus" }
	case DaemonKillRollout:
		want = func(t Target) bool { return t.Rollout }
	case S3Error, S3Latency, S3Reset, S3Truncate, S3Partition, S3Restart:
		want = func(t Target) bool { return t.Driver == "host" && t.S3 }
	default: // host faults
		want = func(t Target) bool { return t.Driver == "host" }
	}
	var out []Target
	for _, t := range p.Targets {
		if want(t) {
			out = append(out, t)
		}
	}
	return out
}

// Build draws the schedule. It is a pure function of the plan.
func Build(p Plan) ([]Fault, error) {
	if p.Faults < 0 {
		return nil, fmt.Errorf("schedule: %d faults", p.Faults)
	}
	kinds := p.Kinds()
	if len(kinds) == 0 {
		return nil, errors.New("schedule: no fault kind is both weighted and available")
	}
	total := 0
	for _, k := range kinds {
		total += p.Mix[k]
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x6368616f73)) // "chaos"
	out := make([]Fault, 0, p.Faults)
	for i := 1; i <= p.Faults; i++ {
		out = append(out, p.draw(rng, i, pickKind(rng, kinds, p.Mix, total)))
	}
	return out, nil
}

func pickKind(rng *rand.Rand, kinds []Kind, mix Mix, total int) Kind {
	n := rng.IntN(total)
	for _, k := range kinds {
		if n < mix[k] {
			return k
		}
		n -= mix[k]
	}
	return kinds[len(kinds)-1]
}

// draw fills in one fault of kind k.
func (p Plan) draw(rng *rand.Rand, seq int, k Kind) Fault {
	targets := p.targetsFor(k)
	t := targets[rng.IntN(len(targets))]
	f := Fault{Seq: seq, Kind: k, Service: t.Service, Pick: rng.Uint32(), Params: map[string]string{}}
	if k == PanicStack {
		f.Service = t.Stack()
	}
	set := func(key string, v int) { f.Params[key] = strconv.Itoa(v) }
	oneOf := func(key string, vs ...string) { f.Params[key] = vs[rng.IntN(len(vs))] }
	switch k {
	case DriverFail:
		oneOf("op", DriverFailOps...)
		set("count", 1+rng.IntN(3))
		if op := f.Params["op"]; op == "start" || op == "inspect" {
			oneOf("kind", "transient", "transient", "not_found", "invalid")
		}
	case DriverTimeout:
		oneOf("op", "start", "inspect")
		set("count", 1+rng.IntN(2))
		set("delay_ms", 500+100*rng.IntN(26))
	case DriverHang:
		oneOf("op", "start", "inspect")
		set("count", 1)
	case StoreError:
		oneOf("op", "get", "put", "list", "delete")
		set("count", 1+rng.IntN(3))
	case StoreLatency:
		oneOf("op", "get", "put")
		set("delay_ms", 100+100*rng.IntN(20))
		set("count", 1+rng.IntN(5))
	case StoreConflict:
		set("count", 1+rng.IntN(2))
	case DaemonKill:
		set("delay_ms", rng.IntN(50))
		for range 1 + rng.IntN(3) {
			if in, ok := p.intent(rng); ok {
				f.Intents = append(f.Intents, in)
			}
		}
	case DaemonKillRollout:
		set("after_slots", rng.IntN(max(1, t.MaxReplicas)))
	case ConfigTruncate, ConfigHalf:
		set("restart", boolInt(rng.IntN(100) < 30))
	case SocketGarbage:
		set("conns", 1+rng.IntN(8))
	case SocketFlood:
		set("conns", 40+rng.IntN(61))
		set("requests", 10+rng.IntN(41))
	case JournalCorrupt:
		oneOf("damage", JournalDamages...)
	case JournalReadonly:
		set("kill", boolInt(rng.IntN(2) == 0))
	case WorkloadStop:
		set("cont", boolInt(rng.IntN(2) == 0)) // SIGCONT it after the restart began, or leave it to the kill
	case DaemonStop:
		set("stop_ms", 1000+250*rng.IntN(17))
	case Compound:
		f.Service = ""
		f.Parts = p.parts(rng)
	case S3Error:
		oneOf("code", "503", "503", "500")
		set("count", 1+rng.IntN(3))
	case S3Latency:
		set("delay_ms", 200+200*rng.IntN(10))
	case IncusAPIError:
		set("count", 1+rng.IntN(3))
	case IncusAPISlow:
		set("delay_ms", 500+500*rng.IntN(7))
	case IncusRestart:
		set("kill", boolInt(rng.IntN(2) == 0))
	case S3Reset:
		oneOf("after", "0", "100", "4096")
		set("count", 1+rng.IntN(2))
	case S3Truncate:
		set("count", 1+rng.IntN(2))
	case ClockJump, ClockJumpAwake:
		oneOf("offset_s", "-7200", "-600", "-45", "45", "600", "7200")
		set("hold_ms", 2000+500*rng.IntN(7))
	case DiskFull:
		set("hold_ms", 1000+500*rng.IntN(7))
		set("kill", boolInt(rng.IntN(100) < 30))
	case DiskEIO:
		set("hold_ms", 1000+500*rng.IntN(7))
		set("kill", boolInt(rng.IntN(100) < 40))
	case DaemonFDLimit:
		set("slack", 4+rng.IntN(12))
		set("hold_ms", 1000+500*rng.IntN(5))
	}
	// Intents aim at replicated services; host faults run on nodes of
	// their own. A corrupt journal loses the intents before it (nothing
	// of a damaged journal is salvaged), so none is drawn for it.
	if k != DaemonKill && k != DaemonKillRollout && k != JournalCorrupt && !k.OnHostPair() && rng.IntN(100) < p.IntentEvery {
		if in, ok := p.intent(rng); ok {
			f.Intents = append(f.Intents, in)
		}
	}
	if len(f.Params) == 0 {
		f.Params = nil
	}
	return f
}

// compoundFamilies are the families a compound fault draws its parts
// from, one kind per family and 2-3 families, in the order they are
// injected: what acts on workloads first, the daemon itself last (a
// relaunched daemon would refuse the ops of the faults after it).
var compoundFamilies = [][]Kind{
	{WorkloadKill, WorkloadStop},
	{DriverFail, DriverTimeout},
	{PanicReplica, PanicService, PanicStack},
	{DaemonStop, DaemonKill},
}

// parts draws the parts of a compound fault.
func (p Plan) parts(rng *rand.Rand) []Fault {
	var fams [][]Kind
	for _, fam := range compoundFamilies {
		var ok []Kind
		for _, k := range fam {
			if p.available(k) && len(p.targetsFor(k)) > 0 {
				ok = append(ok, k)
			}
		}
		if len(ok) > 0 {
			fams = append(fams, ok)
		}
	}
	n := min(len(fams), 2+rng.IntN(2))
	picked := rng.Perm(len(fams))[:n]
	slices.Sort(picked)
	out := make([]Fault, 0, n)
	for _, i := range picked {
		fam := fams[i]
		part := p.draw(rng, 0, fam[rng.IntN(len(fam))])
		part.Seq, part.Intents = 0, nil
		out = append(out, part)
	}
	return out
}

// DriverFailOps are the driver calls driver.fail fails: start and inspect
// meet a killed replica's recovery; create, stop and delete a redeploy;
// exec a probe (cache's); list a restarted service actor's adoption.
var DriverFailOps = []string{"start", "inspect", "start", "inspect", "create", "stop", "delete", "exec", "list"}

// JournalDamages are the damages journal.corrupt draws from: a table's
// bytes overwritten, its footer zeroed, cut in half, emptied, or gone; the
// MANIFEST cut or overwritten; the write-ahead log damaged at its start
// (after a SIGKILL).
var JournalDamages = []string{"sst-bytes", "sst-footer", "sst-cut", "sst-empty", "sst-missing", "manifest-cut", "manifest-junk", "wal"}

// intent draws an operator intent: scale a scalable service, or stop or
// start a stoppable one.
func (p Plan) intent(rng *rand.Rand) (Intent, bool) {
	var choices []Intent
	for _, t := range p.Targets {
		if t.MaxReplicas > t.MinReplicas {
			choices = append(choices, Intent{Op: "scale", Service: t.Service})
		}
		if t.Stoppable {
			choices = append(choices, Intent{Op: "stop", Service: t.Service}, Intent{Op: "start", Service: t.Service})
		}
	}
	if len(choices) == 0 {
		return Intent{}, false
	}
	in := choices[rng.IntN(len(choices))]
	if in.Op == "scale" {
		for _, t := range p.Targets {
			if t.Service == in.Service {
				in.Replicas = t.MinReplicas + rng.IntN(t.MaxReplicas-t.MinReplicas+1)
			}
		}
	}
	return in, true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Format prints a schedule, one fault a line.
func Format(faults []Fault) string {
	var b strings.Builder
	for _, f := range faults {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Fingerprint is a short hash of the printed schedule: two runs with the
// same fingerprint ran the same schedule.
func Fingerprint(faults []Fault) string {
	sum := sha256.Sum256([]byte(Format(faults)))
	return hex.EncodeToString(sum[:6])
}
