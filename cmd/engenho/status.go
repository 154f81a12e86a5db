package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/drivers/cgroup"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// engenho status [STACK[/SERVICE]]: the daemon, then every service, then
// each service's replicas and ports (DMN-12, SVC-19, SVC-21, SVC-22).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "status [STACK[/SERVICE]]",
			Short: "Show the daemon, its services, their replicas and ports",
			Args:  usageArgs(cobra.MaximumNArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				var filter control.StatusArgs
				if len(args) == 1 {
					var err error
					if filter, err = parseStatusFilter(args[0]); err != nil {
						return err
					}
				}
				return withClient(cmd, func(s *session) error {
					res, err := s.c.Status(s.ctx, filter)
					if err != nil {
						return err
					}
					return s.show(res, func() string { return formatStatus(res, time.Now()) })
				})
			},
		}
	})
}

func parseStatusFilter(arg string) (control.StatusArgs, error) {
	if !strings.Contains(arg, "/") {
		return control.StatusArgs{Stack: arg}, checkName("stack", arg)
	}
	ref, err := parseServiceRef(arg)
	return control.StatusArgs{Stack: ref.Stack, Service: ref.Service}, err
}

// Column limits of the status tables.
const (
	messageWidth = 60
	probeWidth   = 40
	failureLines = 10
)

// formatStatus renders a status at a glance.
func formatStatus(res control.StatusResult, now time.Time) string {
	var b strings.Builder
	b.WriteString(daemonLines(res, now))
	if len(res.Services) == 0 && len(res.Hosts) == 0 {
		b.WriteString("\nno services\n")
		return b.String()
	}
	if len(res.Services) > 0 {
		b.WriteString("\n" + serviceTable(res.Services, now))
	}
	for _, svc := range res.Services {
		b.WriteString("\n" + serviceDetail(svc) + overrideLines(svc, now))
	}
	if len(res.Hosts) > 0 {
		b.WriteString("\n" + hostTable(res.Hosts, now))
	}
	return b.String()
}

// hostTable is one row per hibernating host (ACT-2).
func hostTable(hosts []messages.HostStatus, now time.Time) string {
	t := newTable()
	t.row("HOST", "SERVICE", "STATE", "SINCE", "WAKES", "DUE", "REPLICATION", "SHIPPED", "LOSS WINDOW", "LAST ERROR")
	for _, h := range hosts {
		due := "-"
		if !h.Due.IsZero() {
			due = h.Due.UTC().Format(time.RFC3339)
		}
		class, shipped, window := replicationCells(h, now)
		state := string(h.State)
		if h.Fenced {
			state += " (fenced: lease expired)"
		}
		t.row(h.Host, h.Stack+"/"+h.Service, state, since(now, h.Since), strconv.Itoa(h.Wakes), due,
			class, shipped, window, oneLine(h.LastError, messageWidth))
	}
	return t.String()
}

// daemonLines: the lifecycle state line, the node, the stacks.
func daemonLines(res control.StatusResult, now time.Time) string {
	d := res.Daemon
	t := newTable()
	t.row("daemon", lifecycleLine(d.Lifecycle))
	node := d.Node.Name
	if d.Node.ID != "" {
		node += " (" + d.Node.ID + ")"
	}
	proc := fmt.Sprintf("pid %d", d.PID)
	if !d.StartedAt.IsZero() {
		proc += ", up " + since(now, d.StartedAt)
	}
	if d.Version != "" {
		proc += ", version " + d.Version
	}
	if d.PreviousRun != "" {
		proc += ", previous run " + d.PreviousRun
	}
	t.row("node", node)
	t.row("process", proc)
	converged := 0
	for _, st := range res.Stacks {
		if st.Converged {
			converged++
		}
	}
	t.row("stacks", fmt.Sprintf("%d, %d converged", len(res.Stacks), converged))
	return t.String()
}

// serviceTable is one row per service; the message of one that backs off
// ends with when its next attempt is due.
func serviceTable(services []messages.ServiceStatus, now time.Time) string {
	t := newTable()
	t.row("SERVICE", "STATE", "DESIRED", "RUNNING", "HEALTHY", "REVISION", "MESSAGE")
	for _, s := range services {
		state := string(s.State)
		if s.Stopped {
			state += " (stopped)"
		}
		t.row(s.Stack+"/"+s.Service, state, desiredCell(s), strconv.Itoa(s.Running), strconv.Itoa(s.Healthy),
			shortRev(s.Revision), serviceMessage(s, now))
	}
	return t.String()
}

// serviceMessage is the message cut to its column, then the next attempt
// ("; next attempt in 56s") so the cut never hides it.
func serviceMessage(s messages.ServiceStatus, now time.Time) string {
	msg := oneLine(s.Message, messageWidth)
	if s.NextAttempt != nil {
		msg += "; next attempt " + until(now, *s.NextAttempt)
	}
	if len(s.StaleSecrets) > 0 {
		// Not cut to the message width: the names are the point.
		msg = strings.TrimPrefix(msg+"; ", "; ") + "stale secrets: " + strings.Join(s.StaleSecrets, ", ") + " (running instances keep the old value until replaced: engenho redeploy)"
	}
	return msg
}

// serviceDetail is a service's replicas, ports, rollout and, while it is
// not converged, the output of its last failed replica.
func serviceDetail(s messages.ServiceStatus) string {
	var b strings.Builder
	b.WriteString(s.Stack + "/" + s.Service + "\n")
	if len(s.Replicas) > 0 {
		b.WriteString(replicaTable(s.Replicas))
	} else {
		b.WriteString("  no replicas\n")
	}
	if len(s.Ports) > 0 {
		b.WriteString(portTable(s.Ports))
	}
	if s.Rollout != nil {
		b.WriteString("  " + rolloutLine(*s.Rollout) + "\n")
	}
	if s.State != messages.ServiceConverged && s.FailureOutput != "" {
		b.WriteString("  output of the last replica that failed:\n")
		b.WriteString(lastLines(s.FailureOutput, failureLines, "    | "))
	}
	return b.String()
}

func replicaTable(replicas []messages.ReplicaStatus) string {
	t := newTable()
	t.row("SLOT", "REVISION", "PHASE", "HEALTH", "ADDRESS", "IN ROTATION", "RESTARTS", "CPU", "MEM", "PIDS", "LAST PROBE")
	for _, r := range replicas {
		probe := r.LastProbe
		if r.LastError != "" && r.Phase != "serving" {
			probe = "error: " + r.LastError
		}
		cpu, mem, pids := usageCells(r.Usage)
		t.row(strconv.Itoa(r.Slot), shortRev(r.Revision), r.Phase, r.Health, addresses(r.Addresses),
			yesNo(r.InRotation), strconv.Itoa(r.Restarts), cpu, mem, pids, oneLine(probe, probeWidth))
	}
	return t.indented("  ")
}

// usageCells are a replica's usage columns (DRV-16): CPU in cores over
// the last 10s, memory now, processes; empty without a sample.
func usageCells(u *messages.ReplicaUsage) (cpu, mem, pids string) {
	if u == nil {
		return "", "", ""
	}
	cpu = "-"
	if u.CPUCores != nil {
		cpu = strconv.FormatFloat(*u.CPUCores, 'f', 2, 64)
	}
	return cpu, cgroup.FormatBytes(u.MemoryBytes), strconv.FormatInt(u.Pids, 10)
}

func portTable(ports []messages.PortStatus) string {
	t := newTable()
	t.row("PORT", "TARGET", "BACKENDS", "ACCEPTED", "ACTIVE", "RATE")
	for _, p := range ports {
		t.row(p.Listen, strconv.Itoa(p.Target), strconv.Itoa(len(p.Backends)), strconv.FormatUint(p.Accepted, 10),
			strconv.FormatInt(p.Active, 10), strconv.FormatFloat(p.Rate, 'f', 1, 64)+"/s")
	}
	return t.indented("  ")
}

// addresses: "127.0.0.1:31001" for one port, "80=...,443=..." for more.
func addresses(m map[int]string) string {
	if len(m) == 0 {
		return ""
	}
	ports := make([]int, 0, len(m))
	for p := range m {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if len(ports) == 1 {
		return m[ports[0]]
	}
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = strconv.Itoa(p) + "=" + m[p]
	}
	return strings.Join(parts, ",")
}

// rolloutLine: "rollout to 7b1d4e09aa31 from 3f9a2c1b7d4e (stop-first):
// slot 1 done, 2 updating, 3 pending".
func rolloutLine(r messages.RolloutStatus) string {
	var b strings.Builder
	b.WriteString("rollout to " + shortRev(r.Revision))
	if r.From != "" {
		b.WriteString(" from " + shortRev(r.From))
	}
	switch {
	case r.Strategy != "":
		b.WriteString(" (" + r.Strategy + ")") // SVC-25: every slot at once
	case r.Order != "":
		b.WriteString(" (" + r.Order + ")")
	}
	b.WriteString(": " + slotStates(r.Slots))
	if r.Paused {
		b.WriteString("; paused")
	}
	if r.Message != "" {
		b.WriteString("; " + oneLine(r.Message, messageWidth))
	}
	return b.String()
}

// slotStates: "slot 1 done, 2 updating, 3 pending".
func slotStates(slots []messages.SlotStatus) string {
	if len(slots) == 0 {
		return "no slots"
	}
	parts := make([]string, len(slots))
	for i, s := range slots {
		parts[i] = fmt.Sprintf("%d %s", s.Slot, s.State)
	}
	return "slot " + strings.Join(parts, ", ")
}

// shortRev keeps a revision hash readable: its first 12 characters.
func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}
