package stackfile

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxReplicas is a sanity bound on deploy.replicas.
const MaxReplicas = 100_000

// Check reports what is wrong with st as a value, whatever built it:
// Parse runs it (and locates each problem in the file), Unmarshal runs it
// on what the journal held, Validate runs it before asking the node.
// It returns nil or a *ParseError.
func (st *Stack) Check() error {
	ps := checkStack(st)
	if len(ps) == 0 {
		return nil
	}
	for i := range ps {
		ps[i].File = st.Source
		if at, ok := st.pos.lookup(ps[i].Key); ok {
			ps[i].Line, ps[i].Column = at.line, at.col
		}
	}
	return &ParseError{Problems: ps}
}

type checker struct{ problems []Problem }

func (c *checker) add(key string, kind error, format string, args ...any) {
	c.problems = append(c.problems, Problem{Key: key, Msg: fmt.Sprintf(format, args...), Err: kind})
}

func checkStack(st *Stack) []Problem {
	c := &checker{}
	if !ValidName(st.Name) {
		c.add("name", ErrValue, "%s", nameProblem("stack", st.Name, false))
	}
	if len(st.Services) == 0 {
		c.add("services", ErrMissing, "a stack needs at least one service")
	}
	seen := map[string]bool{}
	for _, name := range st.Order {
		if seen[name] {
			c.add("services."+name, ErrValue, "listed twice in the service order")
		}
		seen[name] = true
		if _, ok := st.Services[name]; !ok {
			c.add("services."+name, ErrMissing, "in the service order but not defined")
		}
	}
	checked := map[string]bool{}
	for _, name := range st.Order {
		if svc, ok := st.Services[name]; ok && !checked[name] {
			checked[name] = true
			c.service(name, svc)
		}
	}
	for _, name := range sortedKeys(st.Services) {
		if !seen[name] {
			c.add("services."+name, ErrMissing, "defined but missing from the service order")
		}
	}
	c.dependencies(st)
	c.claims(st)
	c.instanceNameClashes(st)
	c.volumes(st)
	return c.problems
}

func (c *checker) service(key string, svc Service) {
	p := "services." + key
	if !ValidServiceName(key) {
		c.add(p, ErrValue, "%s", serviceNameProblem(key))
	}
	c.composeService(p, svc)
	if svc.Name != key {
		c.add(p, ErrValue, "service is filed under %s but named %s", quote(key), quote(svc.Name))
	}
	c.runnable(p, svc)
	c.secrets(p, svc)
	c.argv(p+".command", svc.Command, true)
	c.argv(p+".args", svc.Args, false)
	if svc.Image != "" && strings.ContainsAny(svc.Image, " \t\n") {
		c.add(p+".image", ErrValue, "an image name has no blanks")
	}
	c.env(p+".env", svc.Env)
	if svc.WorkingDir != "" && !validAbsPath(svc.WorkingDir) {
		c.add(p+".working_dir", ErrValue, "want a clean absolute path, got %s", quote(svc.WorkingDir))
	}
	if svc.User != "" && !validUser(svc.User) {
		c.add(p+".user", ErrValue, "want USER[:GROUP] (names or numbers), got %s", quote(svc.User))
	}
	c.ports(p+".ports", svc.Ports)
	c.healthcheck(p+".healthcheck", svc)
	c.deploy(p+".deploy", svc.Deploy)
	if !ValidName(svc.Driver) {
		c.add(p+".driver", ErrValue, "%s", nameProblem("driver", svc.Driver, false))
	}
	if svc.StopGracePeriod < 0 {
		c.add(p+".stop_grace_period", ErrValue, "must be 0s or more")
	}
	if svc.Hibernate != nil {
		c.hibernate(p, svc)
	}
	c.sidecars(p+".sidecars", svc.Sidecars)
	c.engenho(p+".x-engenho", svc.Engenho)
	c.rollout(p, svc)
}

// runnable: a service runs a command or an image, or is a standalone
// worker made only of sidecars (ACT-12).
func (c *checker) runnable(p string, svc Service) {
	if !svc.Standalone() {
		return
	}
	if len(svc.Sidecars) == 0 {
		c.add(p, ErrMissing, "needs command or image (or sidecars, for a standalone worker)")
		return
	}
	if len(svc.Ports) > 0 {
		c.add(p+".ports", ErrValue, "a standalone worker (sidecars only, no command or image) has no ports")
	}
	if svc.Healthcheck.Enabled() {
		c.add(p+".healthcheck", ErrValue, "a standalone worker (sidecars only, no command or image) has no healthcheck")
	}
	if svc.Deploy.Replicas != 1 {
		c.add(p+".deploy.replicas", ErrValue, "a standalone worker runs once; leave replicas at 1")
	}
}

func (c *checker) argv(p string, argv []string, program bool) {
	if program && len(argv) > 0 && argv[0] == "" {
		c.add(p, ErrValue, "the program (first word) is empty")
	}
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			c.add(p, ErrValue, "holds a NUL byte")
			return
		}
		if err := checkVars(a); err != nil {
			c.add(p, ErrValue, "%v", err)
			return
		}
	}
}

func (c *checker) env(p string, env Env) {
	for _, k := range env.Keys() {
		switch {
		case !validEnvName(k):
			c.add(join(p, k), ErrValue, "%s", envNameProblem(k))
		case slices.Contains(reservedEnv, k):
			c.add(p+"."+k, ErrValue, "%s is set by engenho for every instance", k)
		case strings.ContainsRune(env[k].value, 0):
			c.add(p+"."+k, ErrValue, "the value holds a NUL byte")
		}
	}
}

func (c *checker) ports(p string, ports []Port) {
	targets, published := map[int]bool{}, map[int]bool{}
	for i, port := range ports {
		k := index(p, i)
		switch {
		case port.Target < 1 || port.Target > 65535:
			c.add(k+".target", ErrValue, "port %d is outside 1..65535", port.Target)
		case targets[port.Target]:
			c.add(k+".target", ErrValue, "target port %d is listed twice", port.Target)
		}
		targets[port.Target] = true
		switch {
		case port.Published < 0 || port.Published > 65535:
			c.add(k+".published", ErrValue, "port %d is outside 1..65535", port.Published)
		case port.Published > 0 && published[port.Published]:
			c.add(k+".published", ErrValue, "published port %d is listed twice", port.Published)
		}
		published[port.Published] = true
		if port.Protocol != "tcp" {
			c.add(k+".protocol", ErrUnsupported, "%v", tcpOnly(port.Protocol))
		}
		switch {
		case port.HostIP != "" && port.Published == 0:
			c.add(k+".host_ip", ErrValue, "host_ip needs a published port")
		case port.HostIP != "" && !validIP(port.HostIP):
			c.add(k+".host_ip", ErrValue, "%s is not an IP address", quote(port.HostIP))
		case port.Published > 0 && port.HostIP == "":
			c.add(k+".host_ip", ErrMissing, "a published port needs a host IP (0.0.0.0 for all)")
		}
	}
}

func hasTarget(ports []Port, target int) bool {
	for _, p := range ports {
		if p.Target == target {
			return true
		}
	}
	return false
}

func (c *checker) healthcheck(p string, svc Service) {
	hc := svc.Healthcheck
	switch hc.Kind {
	case ProbeNone:
	case ProbeExec:
		if len(hc.Exec) == 0 || hc.Exec[0] == "" {
			c.add(p+".test", ErrValue, "an exec probe needs a command")
		}
		c.argv(p+".test", hc.Exec, true)
	case ProbeHTTP, ProbeTCP:
		k := p + "." + string(hc.Kind)
		if hc.Kind == ProbeHTTP && (!strings.HasPrefix(hc.Path, "/") || strings.ContainsAny(hc.Path, " \t\r\n")) {
			c.add(k+".path", ErrValue, "want a path starting with /, got %s", quote(hc.Path))
		}
		switch {
		case hc.Port == 0 && len(svc.Ports) == 0:
			c.add(k+".port", ErrMissing, "required: the service lists no ports to probe")
		case !hasTarget(svc.Ports, hc.Port):
			c.add(k+".port", ErrValue, "port %d is not one of the service's target ports", hc.Port)
		}
	default:
		c.add(p, ErrValue, "unknown probe kind %s", quote(string(hc.Kind)))
	}
	if hc.Interval <= 0 {
		c.add(p+".interval", ErrValue, "must be more than 0s")
	}
	if hc.Timeout <= 0 {
		c.add(p+".timeout", ErrValue, "must be more than 0s")
	}
	if hc.StartInterval <= 0 {
		c.add(p+".start_interval", ErrValue, "must be more than 0s")
	}
	if hc.StartPeriod < 0 {
		c.add(p+".start_period", ErrValue, "must be 0s or more")
	}
	if hc.Retries < 1 {
		c.add(p+".retries", ErrValue, "want a positive integer, got %d", hc.Retries)
	}
}

func (c *checker) deploy(p string, d Deploy) {
	if d.Replicas < 0 || d.Replicas > MaxReplicas {
		c.add(p+".replicas", ErrValue, "want 0..%d, got %d", MaxReplicas, d.Replicas)
	}
	rp, rk := d.RestartPolicy, p+".restart_policy"
	oneOf(c, rk+".condition", rp.Condition, RestartNone, RestartOnFailure, RestartAny)
	if rp.MaxAttempts < 0 {
		c.add(rk+".max_attempts", ErrValue, "want a non-negative integer, got %d", rp.MaxAttempts)
	}
	nonNegative(c, rk+".window", rp.Window)
	nonNegative(c, rk+".delay", rp.Delay)
	uc, uk := d.UpdateConfig, p+".update_config"
	if uc.Parallelism < 0 {
		c.add(uk+".parallelism", ErrValue, "want a non-negative integer, got %d", uc.Parallelism)
	}
	nonNegative(c, uk+".delay", uc.Delay)
	oneOf(c, uk+".order", uc.Order, OrderStopFirst, OrderStartFirst)
	oneOf(c, uk+".failure_action", uc.FailureAction, FailurePause, FailureRollback, FailureContinue)
	nonNegative(c, uk+".monitor", uc.Monitor)
	c.resources(p, d.Resources)
}

func (c *checker) hibernate(p string, svc Service) {
	h, k := svc.Hibernate, p+".hibernate"
	switch {
	case h.Host == "":
		c.add(k+".host", ErrMissing, "required: the host name the edge routes to this service")
	case !ValidHost(h.Host):
		c.add(k+".host", ErrValue, "%s", hostProblem(h.Host, "notes.example.com"))
	}
	positiveDuration(c, k+".idle", h.Idle)
	positiveDuration(c, k+".wake_timeout", h.WakeTimeout)
	oneOf(c, k+".replication", h.Replication, ReplicationStream, ReplicationBatched, ReplicationDaily)
	c.argv(k+".seed", h.Seed, true)
	if h.DataDir != "" && !validAbsPath(h.DataDir) {
		c.add(k+".data_dir", ErrValue, "want a clean absolute path, got %s", quote(h.DataDir))
	}
	if !svc.Standalone() {
		switch {
		case len(svc.Ports) == 0:
			c.add(k+".port", ErrMissing, "a hibernating service needs a port for the edge to reach it; list it under ports")
		case !hasTarget(svc.Ports, h.Port):
			c.add(k+".port", ErrValue, "port %d is not one of the service's target ports", h.Port)
		}
	}
	if svc.Deploy.Replicas != 1 {
		c.add(p+".deploy.replicas", ErrValue, "a hibernating service runs one instance; leave replicas at 1")
	}
	for i, port := range svc.Ports {
		if port.Published > 0 {
			c.add(index(p+".ports", i), ErrValue, "a hibernating service is reached through the edge by its host, not a published port; write the target only")
		}
	}
	if svc.Engenho.Host != "" {
		c.add(p+".x-engenho.host", ErrValue, "a hibernating service's host is hibernate.host")
	}
}

func (c *checker) sidecars(p string, scs []Sidecar) {
	names := map[string]bool{}
	for i, sc := range scs {
		k := index(p, i)
		switch {
		case sc.Name == "":
			c.add(k+".name", ErrMissing, "required")
		case !validSidecarName(sc.Name):
			c.add(k+".name", ErrValue, "%s", nameProblem("sidecar", sc.Name, true))
		case names[sc.Name]:
			c.add(k+".name", ErrValue, "sidecar %s is listed twice", sc.Name)
		}
		names[sc.Name] = true
		if len(sc.Command) == 0 {
			c.add(k+".command", ErrMissing, "required")
		}
		c.argv(k+".command", sc.Command, true)
		c.env(k+".env", sc.Env)
		if sc.WorkingDir != "" && !validAbsPath(sc.WorkingDir) {
			c.add(k+".working_dir", ErrValue, "want a clean absolute path, got %s", quote(sc.WorkingDir))
		}
		nonNegative(c, k+".max_run", sc.MaxRun)
		nonNegative(c, k+".stop_grace_period", sc.StopGracePeriod)
		positiveDuration(c, k+".backoff.initial", sc.Backoff.Initial)
		positiveDuration(c, k+".backoff.reset_after", sc.Backoff.ResetAfter)
		if sc.Backoff.Cap < sc.Backoff.Initial {
			c.add(k+".backoff.cap", ErrValue, "must be at least backoff.initial")
		}
	}
}

func (c *checker) engenho(p string, x Engenho) {
	b, bk := x.Backoff, p+".backoff"
	if b.Immediate < 0 {
		c.add(bk+".immediate", ErrValue, "want a non-negative integer, got %d", b.Immediate)
	}
	for i, d := range b.Delays {
		positiveDuration(c, index(bk+".delays", i), d)
	}
	positiveDuration(c, bk+".cap", b.Cap)
	if !(b.Jitter >= 0 && b.Jitter <= 1) {
		c.add(bk+".jitter", ErrValue, "want a fraction from 0 to 1, got %v", b.Jitter)
	}
	positiveDuration(c, p+".stable", x.Stable)
	positiveDuration(c, p+".step_timeout", x.StepTimeout)
	positiveDuration(c, p+".unhealthy_event_after", x.UnhealthyEventAfter)
	nonNegative(c, p+".drain", x.Drain)
	if x.UnhealthyThreshold < 1 {
		c.add(p+".unhealthy_threshold", ErrValue, "want a positive integer, got %d", x.UnhealthyThreshold)
	}
	if x.RestartsBeforeReplace < 1 {
		c.add(p+".restarts_before_replace", ErrValue, "want a positive integer, got %d", x.RestartsBeforeReplace)
	}
	if x.Host != "" && !ValidHost(x.Host) {
		c.add(p+".host", ErrValue, "%s", hostProblem(x.Host, "api.example.com"))
	}
}

// rollout checks x-engenho.rollout (SVC-25): rolling or recreate, and a
// recreate, which stops every old instance first, not with order
// start-first.
func (c *checker) rollout(p string, svc Service) {
	r := svc.Engenho.Rollout
	if r == "" {
		return
	}
	if r != RolloutRolling && r != RolloutRecreate {
		c.add(p+".x-engenho.rollout", ErrValue, "want %s or %s, got %s", RolloutRolling, RolloutRecreate, quote(r))
		return
	}
	if r == RolloutRecreate && svc.Deploy.UpdateConfig.Order == OrderStartFirst {
		c.add(p+".x-engenho.rollout", ErrValue, "recreate stops every old instance before it starts a new one; deploy.update_config.order %s contradicts it (drop one)", OrderStartFirst)
	}
}

// dependencies: targets exist, are not the service itself, can become
// healthy when the condition asks for it, and form no cycle.
func (c *checker) dependencies(st *Stack) {
	for _, name := range st.Order {
		svc, ok := st.Services[name]
		if !ok {
			continue
		}
		for i, d := range svc.DependsOn {
			k := index("services."+name+".depends_on", i)
			target, exists := st.Services[d.Service]
			switch {
			case d.Service == name:
				c.add(k, ErrDependency, "a service cannot depend on itself")
			case !exists:
				c.add(k, ErrDependency, "no service %s in this stack", quote(d.Service))
			case d.Condition != ConditionStarted && d.Condition != ConditionHealthy:
				c.add(k, ErrValue, "condition must be %s or %s, got %s", ConditionStarted, ConditionHealthy, quote(d.Condition))
			case d.Condition == ConditionHealthy && !target.Healthcheck.Enabled():
				c.add(k, ErrDependency, "%s has no healthcheck, so it never becomes healthy; add one or use %s", d.Service, ConditionStarted)
			}
		}
	}
	if cycle := findCycle(st); cycle != nil {
		c.add("services."+cycle[0]+".depends_on", ErrDependency, "dependency cycle: %s", strings.Join(cycle, " → "))
	}
}

// findCycle returns one depends_on cycle (first name repeated at the end),
// or nil.
func findCycle(st *Stack) []string {
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(string) []string
	visit = func(name string) []string {
		state[name] = active
		stack = append(stack, name)
		for _, d := range st.Services[name].DependsOn {
			if _, ok := st.Services[d.Service]; !ok || d.Service == name {
				continue
			}
			switch state[d.Service] {
			case active:
				i := slices.Index(stack, d.Service)
				return append(slices.Clone(stack[i:]), d.Service)
			case unseen:
				if cyc := visit(d.Service); cyc != nil {
					return cyc
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = done
		return nil
	}
	for _, name := range st.Order {
		if _, ok := st.Services[name]; ok && state[name] == unseen {
			if cyc := visit(name); cyc != nil {
				return cyc
			}
		}
	}
	return nil
}

// claims: within a stack, a published port and an edge host belong to one
// service.
func (c *checker) claims(st *Stack) {
	ports, hosts := map[int]string{}, map[string]string{}
	for _, name := range st.Order {
		svc, ok := st.Services[name]
		if !ok {
			continue
		}
		for i, p := range svc.Ports {
			if p.Published == 0 {
				continue
			}
			if other, taken := ports[p.Published]; taken && other != name {
				c.add(index("services."+name+".ports", i), ErrValue, "port %d is also published by service %s", p.Published, other)
			}
			ports[p.Published] = name
		}
		if h := svc.EdgeHost(); h != "" {
			if other, taken := hosts[h]; taken {
				c.add("services."+name+"."+hostKey(svc), ErrValue, "host %s is also used by service %s", h, other)
			}
			hosts[h] = name
		}
	}
}

// hostKey is the key that sets a service's edge host.
func hostKey(svc Service) string {
	if svc.Hibernate != nil {
		return "hibernate.host"
	}
	return "x-engenho.host"
}

func oneOf(c *checker, key, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		c.add(key, ErrValue, "want one of %s, got %s", strings.Join(allowed, ", "), quote(v))
	}
}

func nonNegative(c *checker, key string, d time.Duration) {
	if d < 0 {
		c.add(key, ErrValue, "must be 0s or more")
	}
}

func positiveDuration(c *checker, key string, d time.Duration) {
	if d <= 0 {
		c.add(key, ErrValue, "must be more than 0s")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
