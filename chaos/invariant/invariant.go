package invariant

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/engenho/engenho/chaos/inject"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
)

// The invariants (CHS-3), as reports name them.
const (
	// Converged: every service reaches its declared replicas, healthy.
	Converged = "converged"
	// OnePerSlot: after convergence no slot serves two instances.
	OnePerSlot = "one-per-slot"
	// StoppedIntent: a stopped intent is never violated.
	StoppedIntent = "stopped-intent"
	// SingleAwake: no host is awake on two nodes at once.
	SingleAwake = "single-awake"
	// CheckpointIntact: no checkpoint is lost or corrupted.
	CheckpointIntact = "checkpoint-intact"
	// Acknowledged: every intent acknowledged before a daemon SIGKILL is
	// in the journal after it (REL-3).
	Acknowledged = "acknowledged"
	// NoOrphans: no orphan process or instance after a stop.
	NoOrphans = "no-orphans"
	// NoLeaks: no leaked goroutine after a stop.
	NoLeaks = "no-leaked-goroutines"
	// Untouched: healthy replicas untouched by faults aimed elsewhere are
	// not restarted.
	Untouched = "untouched"
	// ServingIsRunning: every replica status calls serving is a running
	// instance in the driver's own list, the run status describes (a dead
	// workload never passes for a live one).
	ServingIsRunning = "serving-is-running"
	// FaultEffect: a fault's effect is seen (a restart, a new daemon)
	// within its recovery bound, unless its kind may have none.
	FaultEffect = "fault-effect"
)

// Violation is one broken invariant with its evidence.
type Violation struct {
	Invariant string `json:"invariant"`
	// Subject is what broke it: stack/service[/slot], a host, a pid.
	Subject  string `json:"subject"`
	Evidence string `json:"evidence"`
	// Safety violations are reported at once; liveness ones only when
	// they outlast the recovery bound.
	Safety bool `json:"safety,omitempty"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s: %s", v.Invariant, v.Subject, v.Evidence)
}

// Want is what the operator asked for, as the campaign recorded it from
// acknowledged requests.
type Want struct {
	Services []ServiceWant
}

// ServiceWant is one service's declared state.
type ServiceWant struct {
	Service  string // stack/service
	Replicas int
	Stopped  bool
	// StoppedAt is when the stop was acknowledged.
	StoppedAt time.Time
	// Revision is the acknowledged revision (from the last apply); empty
	// accepts any.
	Revision string
	// Probe is set when the service declares a healthcheck: its replicas
	// must be healthy, not just running.
	Probe bool
	// Host marks a hibernating service: it runs only while awake, so
	// Converged does not count its replicas.
	Host bool
}

// Service finds a wanted service.
func (w Want) Service(name string) (ServiceWant, bool) {
	for _, s := range w.Services {
		if s.Service == name {
			return s, true
		}
	}
	return ServiceWant{}, false
}

// Proc is a process on the machine that carries the campaign's marker.
type Proc struct {
	Pid  int
	Pgid int
	// Service is the stack/service the marker names.
	Service string
}

// StartGrace is how long after a stop is acknowledged a start still
// counts as racing the stop rather than violating it: a start call
// already in flight when the intent landed.
const StartGrace = time.Second

func serviceOf(st messages.ServiceStatus) string { return st.Stack + "/" + st.Service }

// instanceKey reads an instance's labels: stack/service and slot; ok is
// false for an instance engenho did not label.
func instanceKey(in inject.Instance) (service string, slot int, ok bool) {
	stack, svc := in.Labels[drivers.LabelStack], in.Labels[drivers.LabelService]
	if stack == "" || svc == "" {
		return "", 0, false
	}
	slot, _ = strconv.Atoi(in.Labels[drivers.LabelSlot])
	return stack + "/" + svc, slot, true
}

func running(in inject.Instance) bool {
	return in.State == drivers.StateRunning || in.State == drivers.StateStarting || in.State == drivers.StateRestarting
}

// CheckConverged: every wanted service that is not stopped reports its
// declared replicas, each serving, healthy (or without a probe, running)
// and in rotation, in slots 1..replicas, at one revision; a stopped one
// reports itself stopped with nothing running. Services nobody wants must
// not be reported.
func CheckConverged(w Want, services []messages.ServiceStatus) []Violation {
	var out []Violation
	bad := func(subject, format string, args ...any) {
		out = append(out, Violation{Invariant: Converged, Subject: subject, Evidence: fmt.Sprintf(format, args...)})
	}
	byName := map[string]messages.ServiceStatus{}
	for _, st := range services {
		byName[serviceOf(st)] = st
		if _, ok := w.Service(serviceOf(st)); !ok {
			bad(serviceOf(st), "reported but not deployed (state %s, %d running)", st.State, st.Running)
		}
	}
	for _, sw := range w.Services {
		st, ok := byName[sw.Service]
		switch {
		case !ok:
			bad(sw.Service, "missing from status")
		case sw.Host:
			continue
		case sw.Stopped:
			if !st.Stopped || st.Running != 0 {
				bad(sw.Service, "stopped intent: status stopped=%t with %d running", st.Stopped, st.Running)
			}
		default:
			out = append(out, convergedService(sw, st)...)
		}
	}
	return out
}

func convergedService(sw ServiceWant, st messages.ServiceStatus) []Violation {
	var out []Violation
	bad := func(subject, format string, args ...any) {
		out = append(out, Violation{Invariant: Converged, Subject: subject, Evidence: fmt.Sprintf(format, args...)})
	}
	if st.Stopped {
		bad(sw.Service, "reported stopped but its stop was lifted")
	}
	if st.State != messages.ServiceConverged {
		bad(sw.Service, "state %s (%s)", st.State, st.Message)
	}
	if st.Desired != sw.Replicas || st.Running != sw.Replicas || st.Healthy != sw.Replicas {
		bad(sw.Service, "want %d replicas: desired %d, running %d, healthy %d", sw.Replicas, st.Desired, st.Running, st.Healthy)
	}
	if sw.Revision != "" && st.Revision != sw.Revision {
		bad(sw.Service, "revision %s, want the acknowledged %s", st.Revision, sw.Revision)
	}
	seen := map[int]int{}
	for _, r := range st.Replicas {
		seen[r.Slot]++
		subject := fmt.Sprintf("%s/%d", sw.Service, r.Slot)
		wantHealth := "healthy"
		if !sw.Probe {
			wantHealth = "none"
		}
		switch {
		case r.Slot < 1 || r.Slot > sw.Replicas:
			bad(subject, "replica %s in a slot above %d (phase %s)", r.Instance, sw.Replicas, r.Phase)
		case r.Phase != "serving" || r.Health != wantHealth || !r.InRotation:
			bad(subject, "replica %s: phase %s, health %s, in rotation %t%s", r.Instance, r.Phase, r.Health, r.InRotation, whyNot(r.LastError, r.FailureOutput))
		case r.Revision != st.Revision:
			bad(subject, "replica %s at revision %s, the service is at %s", r.Instance, r.Revision, st.Revision)
		}
	}
	for slot := 1; slot <= sw.Replicas; slot++ {
		if seen[slot] == 0 {
			bad(fmt.Sprintf("%s/%d", sw.Service, slot), "no replica in the slot")
		}
	}
	for slot, n := range seen {
		if n > 1 {
			bad(fmt.Sprintf("%s/%d", sw.Service, slot), "status shows %d replicas in the slot", n)
		}
	}
	return out
}

// CheckOnePerSlot looks at what the drivers really run: at most one
// running instance per slot, none above the declared replicas, and every
// running one at the service's current revision.
func CheckOnePerSlot(w Want, services []messages.ServiceStatus, instances []inject.Instance) []Violation {
	revision := map[string]string{}
	for _, st := range services {
		revision[serviceOf(st)] = st.Revision
	}
	type slotKey struct {
		service string
		slot    int
	}
	bySlot := map[slotKey][]string{}
	var out []Violation
	for _, in := range instances {
		svc, slot, ok := instanceKey(in)
		sw, wanted := w.Service(svc)
		if !ok || !wanted || sw.Stopped || sw.Host || !running(in) {
			continue
		}
		k := slotKey{svc, slot}
		bySlot[k] = append(bySlot[k], fmt.Sprintf("%s (pid %d, started %s)", in.Name, in.Pid, in.StartedAt.Format(time.RFC3339Nano)))
		subject := fmt.Sprintf("%s/%d", svc, slot)
		if slot > sw.Replicas {
			out = append(out, Violation{Invariant: OnePerSlot, Subject: subject,
				Evidence: fmt.Sprintf("%s runs in a slot above the %d declared", in.Name, sw.Replicas)})
		}
		if rev := revision[svc]; rev != "" && in.Labels[drivers.LabelRevision] != rev {
			out = append(out, Violation{Invariant: OnePerSlot, Subject: subject,
				Evidence: fmt.Sprintf("%s runs revision %s, the service is at %s", in.Name, in.Labels[drivers.LabelRevision], rev)})
		}
	}
	for k, names := range bySlot {
		if len(names) > 1 {
			sort.Strings(names)
			out = append(out, Violation{Invariant: OnePerSlot, Subject: fmt.Sprintf("%s/%d", k.service, k.slot),
				Evidence: fmt.Sprintf("%d instances run in the slot: %s", len(names), strings.Join(names, ", "))})
		}
	}
	return sorted(out)
}

// CheckServingIsRunning: every replica that status shows serving or in
// rotation is, in the drivers' own unfiltered list, a running instance of
// the same name whose run began when status says it did. The drivers are
// read before status, so status is never older than the list.
func CheckServingIsRunning(services []messages.ServiceStatus, instances []inject.Instance) []Violation {
	byName := map[string]inject.Instance{}
	for _, in := range instances {
		byName[in.Name] = in
	}
	var out []Violation
	for _, st := range services {
		for _, r := range st.Replicas {
			if r.Phase != "serving" && !r.InRotation {
				continue
			}
			subject := fmt.Sprintf("%s/%d", serviceOf(st), r.Slot)
			in, ok := byName[r.Instance]
			switch {
			case !ok:
				out = append(out, Violation{Invariant: ServingIsRunning, Subject: subject,
					Evidence: fmt.Sprintf("status shows %s %s (in rotation %t) but the driver has no such instance", r.Instance, r.Phase, r.InRotation)})
			case in.State != drivers.StateRunning:
				out = append(out, Violation{Invariant: ServingIsRunning, Subject: subject,
					Evidence: fmt.Sprintf("status shows %s %s (in rotation %t) but the driver has it %s", r.Instance, r.Phase, r.InRotation, in.State)})
			case !r.StartedAt.IsZero() && !r.StartedAt.Equal(in.StartedAt):
				out = append(out, Violation{Invariant: ServingIsRunning, Subject: subject,
					Evidence: fmt.Sprintf("status shows %s %s for the run started %s, the driver runs one started %s", r.Instance, r.Phase,
						r.StartedAt.Format(time.RFC3339Nano), in.StartedAt.Format(time.RFC3339Nano))})
			}
		}
	}
	return out
}

// CheckStopped: an instance of a stopped service started after the stop
// was acknowledged (plus StartGrace) is a safety violation; one still
// running, or a marked process of the service still alive, is a liveness
// one.
func CheckStopped(w Want, instances []inject.Instance, procs []Proc) []Violation {
	var out []Violation
	for _, in := range instances {
		svc, slot, ok := instanceKey(in)
		sw, wanted := w.Service(svc)
		if !ok || !wanted || !sw.Stopped || !running(in) {
			continue
		}
		subject := fmt.Sprintf("%s/%d", svc, slot)
		if in.StartedAt.After(sw.StoppedAt.Add(StartGrace)) {
			out = append(out, Violation{Invariant: StoppedIntent, Subject: subject, Safety: true,
				Evidence: fmt.Sprintf("%s (pid %d) started at %s, after the stop acknowledged at %s", in.Name, in.Pid,
					in.StartedAt.Format(time.RFC3339Nano), sw.StoppedAt.Format(time.RFC3339Nano))})
			continue
		}
		out = append(out, Violation{Invariant: StoppedIntent, Subject: subject,
			Evidence: fmt.Sprintf("%s (pid %d) still runs; the stop was acknowledged at %s", in.Name, in.Pid, sw.StoppedAt.Format(time.RFC3339Nano))})
	}
	for _, p := range procs {
		if sw, ok := w.Service(p.Service); ok && sw.Stopped {
			out = append(out, Violation{Invariant: StoppedIntent, Subject: p.Service,
				Evidence: fmt.Sprintf("process %d (group %d) of the stopped service is alive", p.Pid, p.Pgid)})
		}
	}
	return sorted(out)
}

// CheckOrphans: every running instance belongs to a service that is
// deployed, and every marked process belongs to a running instance's
// process group (the process driver runs each instance in a group of its
// own, led by the instance's pid).
func CheckOrphans(w Want, instances []inject.Instance, procs []Proc) []Violation {
	var out []Violation
	leaders := map[int]bool{}
	for _, in := range instances {
		if !running(in) {
			continue
		}
		if in.Driver == "process" && in.Pid > 0 {
			leaders[in.Pid] = true
		}
		svc, slot, ok := instanceKey(in)
		if !ok {
			continue
		}
		if _, wanted := w.Service(svc); !wanted {
			out = append(out, Violation{Invariant: NoOrphans, Subject: fmt.Sprintf("%s/%d", svc, slot),
				Evidence: fmt.Sprintf("%s (%s, pid %d) runs but its service is not deployed", in.Name, in.Driver, in.Pid)})
		}
	}
	for _, p := range procs {
		if !leaders[p.Pgid] {
			out = append(out, Violation{Invariant: NoOrphans, Subject: p.Service,
				Evidence: fmt.Sprintf("process %d (group %d) belongs to no running instance", p.Pid, p.Pgid)})
		}
	}
	return sorted(out)
}

// CheckUntouched: every instance that was running and healthy before the
// fault, in a slot the fault did not aim at, still runs with the same pid
// and start time after it. touched reports the slots the fault (and the
// intents before it) may change.
func CheckUntouched(before, after []inject.Instance, healthy map[string]bool, touched func(service string, slot int) bool) []Violation {
	now := map[string]inject.Instance{}
	for _, in := range after {
		now[in.Name] = in
	}
	var out []Violation
	for _, b := range before {
		svc, slot, ok := instanceKey(b)
		if !ok || !running(b) || !healthy[b.Name] || touched(svc, slot) {
			continue
		}
		subject := fmt.Sprintf("%s/%d", svc, slot)
		a, found := now[b.Name]
		switch {
		case !found:
			out = append(out, Violation{Invariant: Untouched, Subject: subject, Safety: true,
				Evidence: fmt.Sprintf("%s (pid %d) was replaced: it no longer exists", b.Name, b.Pid)})
		case !running(a):
			out = append(out, Violation{Invariant: Untouched, Subject: subject, Safety: true,
				Evidence: fmt.Sprintf("%s (pid %d) is %s", b.Name, b.Pid, a.State)})
		case a.Pid != b.Pid || !a.StartedAt.Equal(b.StartedAt):
			out = append(out, Violation{Invariant: Untouched, Subject: subject, Safety: true,
				Evidence: fmt.Sprintf("%s was restarted: pid %d started %s, now pid %d started %s", b.Name,
					b.Pid, b.StartedAt.Format(time.RFC3339Nano), a.Pid, a.StartedAt.Format(time.RFC3339Nano))})
		}
	}
	return sorted(out)
}

// Ack is one acknowledged operator request.
type Ack struct {
	Service string // stack/service
	// What the request set: "replicas", "stopped" or "revision".
	What  string
	Value string
	At    time.Time
}

// CheckAcknowledged: after a daemon SIGKILL, the status read back from the
// journal shows the last acknowledged value of everything acks set (REL-3).
func CheckAcknowledged(acks []Ack, services []messages.ServiceStatus) []Violation {
	last := map[[2]string]Ack{}
	for _, a := range acks {
		last[[2]string{a.Service, a.What}] = a
	}
	byName := map[string]messages.ServiceStatus{}
	for _, st := range services {
		byName[serviceOf(st)] = st
	}
	var out []Violation
	for _, a := range last {
		st, ok := byName[a.Service]
		var got string
		switch {
		case !ok:
			got = "no such service"
		case a.What == "replicas":
			got = strconv.Itoa(st.Desired)
		case a.What == "stopped":
			got = strconv.FormatBool(st.Stopped)
		case a.What == "revision":
			got = st.Revision
		}
		if got != a.Value {
			out = append(out, Violation{Invariant: Acknowledged, Subject: a.Service,
				Evidence: fmt.Sprintf("%s=%s acknowledged at %s before the SIGKILL; after the restart the daemon has %s",
					a.What, a.Value, a.At.Format(time.RFC3339Nano), got)})
		}
	}
	return sorted(out)
}

// HostView is one node's view of one host.
type HostView struct {
	Node  string
	Host  string
	State messages.HostState
	// Fenced: the node's lease is past its validity by the node's own
	// clock, so its gate admits nothing (ACT-14): it does not serve.
	Fenced bool
	// Busy names the host's operations in flight (its status's busy): a
	// restarted host actor shows asleep while its cleanup still stops
	// what the last incarnation left running.
	Busy string
}

// CheckSingleAwake: no host is awake (or stopping, its instance still up)
// on two nodes at once.
func CheckSingleAwake(views []HostView) []Violation {
	awake := map[string][]string{}
	for _, v := range views {
		if (v.State == messages.HostAwake || v.State == messages.HostStopping) && !v.Fenced {
			awake[v.Host] = append(awake[v.Host], v.Node+" ("+string(v.State)+")")
		}
	}
	var out []Violation
	for host, nodes := range awake {
		if len(nodes) > 1 {
			sort.Strings(nodes)
			out = append(out, Violation{Invariant: SingleAwake, Subject: host, Safety: true,
				Evidence: "awake on " + strings.Join(nodes, " and ")})
		}
	}
	return sorted(out)
}

// CheckCheckpoint: a restored data directory's checksum matches the last
// checkpoint's.
func CheckCheckpoint(host, checkpointSum, restoredSum string) []Violation {
	if checkpointSum == restoredSum {
		return nil
	}
	return []Violation{{Invariant: CheckpointIntact, Subject: host, Safety: true,
		Evidence: fmt.Sprintf("restored data has checksum %s, the last checkpoint %s", restoredSum, checkpointSum)}}
}

// CheckGoroutines: a daemon after a stop has at most slack goroutines
// more than a fresh daemon with nothing deployed. The evidence lists the
// groups that grew most.
func CheckGoroutines(fresh, after map[string]int, slack int) []Violation {
	total := func(m map[string]int) int {
		n := 0
		for _, c := range m {
			n += c
		}
		return n
	}
	tf, ta := total(fresh), total(after)
	if ta <= tf+slack {
		return nil
	}
	type grew struct {
		key string
		n   int
	}
	var groups []grew
	for k, c := range after {
		if d := c - fresh[k]; d > 0 {
			groups = append(groups, grew{k, d})
		}
	}
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].n != groups[j].n {
			return groups[i].n > groups[j].n
		}
		return groups[i].key < groups[j].key
	})
	var parts []string
	for i, g := range groups {
		if i == 5 {
			break
		}
		parts = append(parts, fmt.Sprintf("+%d %s", g.n, g.key))
	}
	return []Violation{{Invariant: NoLeaks, Subject: "daemon",
		Evidence: fmt.Sprintf("%d goroutines after the stop, a fresh daemon has %d (slack %d): %s", ta, tf, slack, strings.Join(parts, "; "))}}
}

// Safety keeps the safety violations of vs.
func Safety(vs []Violation) []Violation {
	var out []Violation
	for _, v := range vs {
		if v.Safety {
			out = append(out, v)
		}
	}
	return out
}

func sorted(vs []Violation) []Violation {
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].Invariant != vs[j].Invariant {
			return vs[i].Invariant < vs[j].Invariant
		}
		if vs[i].Subject != vs[j].Subject {
			return vs[i].Subject < vs[j].Subject
		}
		return vs[i].Evidence < vs[j].Evidence
	})
	return vs
}

// whyNot is what a replica last said about a failure, for the evidence.
func whyNot(lastErr, output string) string {
	out := ""
	if lastErr != "" {
		out += "; last error: " + lastErr
	}
	if output != "" {
		if len(output) > 300 {
			output = "..." + output[len(output)-300:]
		}
		out += "; output: " + output
	}
	return out
}
