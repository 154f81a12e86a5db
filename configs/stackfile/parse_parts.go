package stackfile

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ---- ports ----

var portKeys = []string{"target", "published", "host_ip", "protocol"}

// ports reads `ports`: Compose short strings or long-form maps.
func (w *walker) ports(n *yaml.Node, path string) []Port {
	items, ok := w.sequence(n, path)
	if !ok {
		return nil
	}
	var out []Port
	for i, item := range items {
		p := index(path, i)
		r := w.resolve(item, p)
		if r == nil {
			continue
		}
		w.at(r, p)
		var port Port
		var good bool
		if r.Kind == yaml.MappingNode {
			port, good = w.portLong(r, p)
		} else if s, ok := w.str(r, p); ok {
			var err error
			if port, err = parseShortPort(s); err != nil {
				kind := ErrValue
				if errors.Is(err, ErrUnsupported) {
					kind = ErrUnsupported
				}
				w.problem(r, p, kind, "%v", err)
			} else {
				good = true
			}
		}
		if good {
			out = append(out, port)
		}
	}
	return out
}

// parseShortPort reads "TARGET", "PUBLISHED:TARGET" or
// "HOST_IP:PUBLISHED:TARGET", each with an optional "/tcp".
func parseShortPort(s string) (Port, error) {
	spec, proto, hasProto := strings.Cut(s, "/")
	if hasProto && proto != "tcp" {
		return Port{}, tcpOnly(proto)
	}
	if strings.Contains(spec, "-") {
		return Port{}, errors.New("port ranges are not supported")
	}
	var hostIP string
	if strings.HasPrefix(spec, "[") {
		end := strings.Index(spec, "]:")
		if end < 0 {
			return Port{}, errors.New("want [IPV6]:PUBLISHED:TARGET, got " + strconv.Quote(s))
		}
		hostIP, spec = spec[1:end], spec[end+2:]
		if !strings.Contains(spec, ":") {
			return Port{}, errors.New("want [IPV6]:PUBLISHED:TARGET, got " + strconv.Quote(s))
		}
	}
	parts := strings.Split(spec, ":")
	if hostIP == "" && len(parts) > 3 && validIP(strings.Join(parts[:len(parts)-2], ":")) {
		return Port{}, errors.New("an IPv6 host address goes in brackets: [IPV6]:PUBLISHED:TARGET, got " + strconv.Quote(s))
	}
	if hostIP == "" && len(parts) == 3 {
		hostIP, parts = parts[0], parts[1:]
	}
	if len(parts) == 2 && parts[0] == "" {
		return Port{}, errors.New("a random published port (HOST_IP::TARGET) is not supported: give the port to publish, got " + strconv.Quote(s))
	}
	port := Port{Protocol: "tcp", HostIP: hostIP}
	var err error
	switch len(parts) {
	case 1:
		port.Target, err = portNumber(parts[0])
	case 2:
		if port.Published, err = portNumber(parts[0]); err == nil {
			port.Target, err = portNumber(parts[1])
		}
	default:
		return Port{}, errors.New("want TARGET, PUBLISHED:TARGET or HOST_IP:PUBLISHED:TARGET, got " + strconv.Quote(s))
	}
	if err != nil {
		return Port{}, errors.New(err.Error() + " in " + strconv.Quote(s))
	}
	if hostIP != "" && !validIP(hostIP) {
		return Port{}, errors.New("host IP " + strconv.Quote(hostIP) + " is not an IP address")
	}
	if port.Published > 0 && port.HostIP == "" {
		port.HostIP = "0.0.0.0"
	}
	return port, nil
}

func portNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || !allDigits(s) {
		return 0, errors.New("want a port number, got " + strconv.Quote(s))
	}
	if n < 1 || n > 65535 {
		return 0, errors.New("port " + s + " is outside 1..65535")
	}
	return n, nil
}

func (w *walker) portLong(n *yaml.Node, path string) (Port, bool) {
	entries, _ := w.mapping(n, path)
	port := Port{Protocol: "tcp"}
	good, hasTarget := true, false
	for _, e := range entries {
		var ok bool
		switch e.key {
		case "target":
			port.Target, ok = w.intValue(e.vn, e.path, "a port number")
			hasTarget = ok
		case "published":
			// Compose allows a string here.
			var s string
			if s, ok = w.str(e.vn, e.path); ok {
				var err error
				if strings.Contains(s, "-") {
					w.problem(e.vn, e.path, ErrValue, "port ranges are not supported, got %s", quote(s))
					ok = false
				} else if port.Published, err = portNumber(s); err != nil {
					w.problem(e.vn, e.path, ErrValue, "%v", err)
					ok = false
				}
			}
		case "host_ip":
			port.HostIP, ok = w.str(e.vn, e.path)
		case "protocol":
			if port.Protocol, ok = w.str(e.vn, e.path); ok && port.Protocol != "tcp" {
				w.problem(e.vn, e.path, ErrUnsupported, "%v", tcpOnly(port.Protocol))
				ok = false
			}
		default:
			if isExtension(e.key) || w.composePortKey(e) {
				continue
			}
			w.unknownKey(e, portKeys)
		}
		good = good && ok
	}
	if !hasTarget && good {
		w.problem(n, join(path, "target"), ErrMissing, "required")
		return port, false
	}
	if port.Published > 0 && port.HostIP == "" {
		port.HostIP = "0.0.0.0"
	}
	return port, good
}

// ---- healthcheck ----

var healthKeys = []string{"test", "http", "tcp", "interval", "timeout", "retries", "start_period", "start_interval", "disable"}

// healthcheck reads `healthcheck`. One of test (Compose: an exec probe),
// http or tcp; or disable: true / test: NONE.
func (w *walker) healthcheck(n *yaml.Node, path string) Healthcheck {
	hc := defaultHealthcheck()
	entries, ok := w.mapping(n, path)
	if !ok {
		return hc
	}
	var probes []string
	disabled := false
	for _, e := range entries {
		switch e.key {
		case "test":
			probes = append(probes, e.key)
			if w.healthTest(&hc, e.vn, e.path) {
				disabled = true
			}
		case "http":
			probes = append(probes, e.key)
			hc.Kind = ProbeHTTP
			hc.Path, hc.Port = w.probeTarget(e.vn, e.path, true)
		case "tcp":
			probes = append(probes, e.key)
			hc.Kind = ProbeTCP
			_, hc.Port = w.probeTarget(e.vn, e.path, false)
		case "interval":
			hc.Interval = w.durationOr(e, hc.Interval)
		case "timeout":
			hc.Timeout = w.durationOr(e, hc.Timeout)
		case "start_period":
			hc.StartPeriod = w.durationOr(e, hc.StartPeriod)
		case "start_interval":
			hc.StartInterval = w.durationOr(e, hc.StartInterval)
		case "retries":
			if v, ok := w.positive(e.vn, e.path); ok {
				hc.Retries = v
			}
		case "disable":
			if v, ok := w.boolean(e.vn, e.path); ok && v {
				disabled = true
			}
		case "x-engenho":
			probes = append(probes, w.healthEngenho(&hc, e)...)
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, healthKeys)
			}
		}
	}
	switch {
	case len(probes) > 1:
		w.problem(n, path, ErrValue, "give one probe: test, http or tcp (got %s)", strings.Join(probes, " and "))
	case len(probes) == 0 && !disabled:
		w.problem(n, path, ErrMissing, "needs a probe: test, http or tcp (or disable: true)")
	}
	if disabled {
		hc.Kind, hc.Exec, hc.Path, hc.Port = ProbeNone, nil, "", 0
	}
	return hc
}

// durationOr reads a duration, keeping def when it does not decode.
func (w *walker) durationOr(e entry, def time.Duration) time.Duration {
	if d, ok := w.duration(e.vn, e.path); ok {
		return d
	}
	return def
}

// healthTest reads Compose's test; it reports whether it says NONE.
func (w *walker) healthTest(hc *Healthcheck, n *yaml.Node, path string) (none bool) {
	r := w.resolve(n, path)
	if r == nil {
		return false
	}
	if r.Kind == yaml.ScalarNode {
		s, ok := w.str(r, path)
		switch {
		case !ok:
		case s == "NONE":
			return true
		case strings.TrimSpace(s) == "":
			w.problem(r, path, ErrValue, "empty test")
		default:
			hc.Kind, hc.Exec = ProbeExec, []string{"/bin/sh", "-c", s}
		}
		return false
	}
	argv, ok := w.strList(r, path)
	if !ok {
		return false
	}
	if len(argv) == 0 {
		w.problem(r, path, ErrValue, `empty test: want ["CMD", ...], ["CMD-SHELL", "..."] or "NONE"`)
		return false
	}
	switch argv[0] {
	case "NONE":
		if len(argv) > 1 {
			w.problem(r, path, ErrValue, `["NONE"] takes nothing after it`)
		}
		return true
	case "CMD":
		if len(argv) < 2 || argv[1] == "" {
			w.problem(r, path, ErrValue, `["CMD", ...] needs a program after CMD`)
			return false
		}
		hc.Kind, hc.Exec = ProbeExec, argv[1:]
	case "CMD-SHELL":
		if len(argv) != 2 || strings.TrimSpace(argv[1]) == "" {
			w.problem(r, path, ErrValue, `["CMD-SHELL", "..."] takes exactly one command string`)
			return false
		}
		hc.Kind, hc.Exec = ProbeExec, []string{"/bin/sh", "-c", argv[1]}
	default:
		w.problem(r, path, ErrValue, `the first item must be CMD, CMD-SHELL or NONE, got %s`, quote(argv[0]))
		return false
	}
	w.checkArgvVars(r, path, hc.Exec)
	return false
}

// probeTarget reads {path, port} (http) or {port} (tcp).
func (w *walker) probeTarget(n *yaml.Node, path string, http bool) (urlPath string, port int) {
	allowed := []string{"port"}
	if http {
		allowed = append(allowed, "path")
		urlPath = "/"
	}
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch {
		case e.key == "port":
			port, _ = w.intValue(e.vn, e.path, "a port number")
		case e.key == "path" && http:
			if s, ok := w.str(e.vn, e.path); ok {
				urlPath = s
			}
		case isExtension(e.key):
		default:
			w.unknownKey(e, allowed)
		}
	}
	return urlPath, port
}

// ---- depends_on ----

var dependencyKeys = []string{"condition", "restart", "required"}

// dependsOn reads a list of names (service_started) or a map of name to
// {condition}.
func (w *walker) dependsOn(n *yaml.Node, path string) []Dependency {
	r := w.resolve(n, path)
	if r == nil {
		return nil
	}
	var out []Dependency
	seen := map[string]bool{}
	add := func(node *yaml.Node, key string, d Dependency) {
		if seen[d.Service] {
			w.problem(node, key, ErrDependency, "%s listed twice", d.Service)
			return
		}
		seen[d.Service] = true
		w.at(node, index(path, len(out)))
		out = append(out, d)
	}
	if r.Kind == yaml.SequenceNode {
		items, _ := w.sequence(r, path)
		for i, item := range items {
			if name, ok := w.str(item, index(path, i)); ok {
				add(w.resolve(item, ""), index(path, i), Dependency{Service: name, Condition: ConditionStarted})
			}
		}
		return out
	}
	entries, ok := w.mapping(r, path)
	if !ok {
		return nil
	}
	for _, e := range entries {
		d := Dependency{Service: e.key, Condition: ConditionStarted}
		if v := w.resolve(e.vn, e.path); v != nil && !(v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null") {
			opts, _ := w.mapping(v, e.path)
			for _, o := range opts {
				switch {
				case o.key == "condition":
					if s, ok := w.str(o.vn, o.path); ok {
						d.Condition = s
					}
				case o.key == "restart":
					d.Restart, _ = w.boolean(o.vn, o.path)
				case o.key == "required":
					if required, ok := w.boolean(o.vn, o.path); ok {
						d.Optional = !required
					}
				case !isExtension(o.key):
					w.unknownKey(o, dependencyKeys)
				}
			}
		}
		add(e.kn, e.path, d)
	}
	return out
}

// ---- deploy ----

var (
	deployKeys    = []string{"replicas", "restart_policy", "update_config", "resources"}
	restartKeys   = []string{"condition", "max_attempts", "window", "delay"}
	updateKeys    = []string{"parallelism", "delay", "order", "failure_action", "monitor"}
	resourcesKeys = []string{"limits", "reservations"}
	limitsKeys    = []string{"cpus", "memory", "pids"}
)

func (w *walker) deploy(n *yaml.Node, path string) Deploy {
	d := defaultDeploy()
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch e.key {
		case "replicas":
			if v, ok := w.count(e.vn, e.path); ok {
				d.Replicas = v
			}
		case "restart_policy":
			w.restartPolicy(&d.RestartPolicy, e.vn, e.path)
		case "update_config":
			w.updateConfig(&d.UpdateConfig, e.vn, e.path)
		case "resources":
			w.resources(&d.Resources, e.vn, e.path)
		default:
			if !isExtension(e.key) && !w.deployKey(&d, e) {
				w.unknownKey(e, deployKeys)
			}
		}
	}
	return d
}

func (w *walker) restartPolicy(rp *RestartPolicy, n *yaml.Node, path string) {
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch e.key {
		case "condition":
			if s, ok := w.str(e.vn, e.path); ok {
				rp.Condition = s
			}
		case "max_attempts":
			if v, ok := w.count(e.vn, e.path); ok {
				rp.MaxAttempts = v
			}
		case "window":
			rp.Window = w.durationOr(e, rp.Window)
		case "delay":
			rp.Delay = w.durationOr(e, rp.Delay)
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, restartKeys)
			}
		}
	}
}

func (w *walker) updateConfig(uc *UpdateConfig, n *yaml.Node, path string) {
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch e.key {
		case "parallelism":
			if v, ok := w.count(e.vn, e.path); ok {
				uc.Parallelism = v
			}
		case "delay":
			uc.Delay = w.durationOr(e, uc.Delay)
		case "order":
			if s, ok := w.str(e.vn, e.path); ok {
				uc.Order = s
			}
		case "failure_action":
			if s, ok := w.str(e.vn, e.path); ok {
				uc.FailureAction = s
			}
		case "monitor":
			uc.Monitor = w.durationOr(e, uc.Monitor)
		case "max_failure_ratio":
			w.warn(e.kn, e.path, "ignored: engenho takes any failed slot as the update failing (failure_action), as Compose does with max_failure_ratio: 0")
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, updateKeys)
			}
		}
	}
}

// memory reads bytes: an integer, or a number with a unit b, k, m, g, t
// (optionally followed by b or ib; all powers of 1024, as Compose does).
func (w *walker) memory(n *yaml.Node, path string) int64 {
	s, ok := w.str(n, path)
	if !ok {
		return 0
	}
	v, err := parseBytes(s)
	if err != nil {
		w.problem(n, path, ErrValue, "want a size like 512m or 1g, got %s", quote(s))
		return 0
	}
	return v
}

func parseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	i := 0
	for i < len(t) && (isDigit(t[i]) || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, errors.New("not a size")
	}
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "b"), "i")
	mult := map[string]float64{"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
	m, ok := mult[unit]
	if !ok {
		return 0, errors.New("unknown unit")
	}
	if v := f * m; v < math.MaxInt64/2 {
		return int64(v), nil
	}
	return 0, errors.New("too large")
}

// ---- hibernate ----

var hibernateKeys = []string{"host", "idle", "seed", "replication", "data_dir", "port", "wake_timeout"}

func (w *walker) hibernate(n *yaml.Node, path string) Hibernate {
	h := defaultHibernate()
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch e.key {
		case "host":
			h.Host, _ = w.str(e.vn, e.path)
		case "idle":
			h.Idle = w.durationOr(e, h.Idle)
		case "seed":
			h.Seed = w.command(e.vn, e.path)
		case "replication":
			if s, ok := w.str(e.vn, e.path); ok {
				h.Replication = s
			}
		case "data_dir":
			h.DataDir, _ = w.str(e.vn, e.path)
		case "port":
			h.Port, _ = w.intValue(e.vn, e.path, "a port number")
		case "wake_timeout":
			h.WakeTimeout = w.durationOr(e, h.WakeTimeout)
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, hibernateKeys)
			}
		}
	}
	return h
}

// ---- sidecars ----

var (
	sidecarKeys        = []string{"name", "command", "env", "environment", "working_dir", "always_on", "max_run", "stop_grace_period", "backoff"}
	sidecarBackoffKeys = []string{"initial", "cap", "reset_after"}
)

func (w *walker) sidecars(n *yaml.Node, path string) []Sidecar {
	items, _ := w.sequence(n, path)
	out := make([]Sidecar, 0, len(items))
	for i, item := range items {
		out = append(out, w.sidecar(item, index(path, i)))
	}
	return out
}

func (w *walker) sidecar(n *yaml.Node, path string) Sidecar {
	sc := defaultSidecar()
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch e.key {
		case "name":
			sc.Name, _ = w.str(e.vn, e.path)
		case "command":
			sc.Command = w.command(e.vn, e.path)
		case "env", "environment":
			if sc.Env != nil {
				w.problem(e.kn, e.path, ErrValue, "env and environment are the same key: keep one")
				continue
			}
			sc.Env = w.env(e.vn, e.path)
		case "working_dir":
			sc.WorkingDir, _ = w.str(e.vn, e.path)
		case "always_on":
			sc.AlwaysOn, _ = w.boolean(e.vn, e.path)
		case "max_run":
			sc.MaxRun = w.durationOr(e, sc.MaxRun)
		case "stop_grace_period":
			sc.StopGracePeriod = w.durationOr(e, sc.StopGracePeriod)
		case "backoff":
			b, _ := w.mapping(e.vn, e.path)
			for _, be := range b {
				switch be.key {
				case "initial":
					sc.Backoff.Initial = w.durationOr(be, sc.Backoff.Initial)
				case "cap":
					sc.Backoff.Cap = w.durationOr(be, sc.Backoff.Cap)
				case "reset_after":
					sc.Backoff.ResetAfter = w.durationOr(be, sc.Backoff.ResetAfter)
				default:
					if !isExtension(be.key) {
						w.unknownKey(be, sidecarBackoffKeys)
					}
				}
			}
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, sidecarKeys)
			}
		}
	}
	return sc
}

// ---- x-engenho ----

var (
	engenhoKeys = []string{"backoff", "stable", "step_timeout", "unhealthy_threshold", "restarts_before_replace",
		"drain", "unhealthy_event_after", "secret_env", "host", "secrets", "rollout"}
	backoffKeys = []string{"immediate", "delays", "cap", "jitter"}
)

// engenho reads `x-engenho`; it returns secret_env for the caller to apply.
// service reads the service keys x-engenho also takes (driver, ...).
func (w *walker) engenho(n *yaml.Node, path string, service func(entry) bool) (Engenho, []keyAt) {
	x := defaultEngenho()
	var secrets []keyAt
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch e.key {
		case "backoff":
			w.backoff(&x.Backoff, e.vn, e.path)
			x.Backoff.Declared = true
		case "stable":
			x.Stable = w.durationOr(e, x.Stable)
		case "step_timeout":
			x.StepTimeout = w.durationOr(e, x.StepTimeout)
		case "unhealthy_threshold":
			if v, ok := w.positive(e.vn, e.path); ok {
				x.UnhealthyThreshold = v
			}
		case "restarts_before_replace":
			if v, ok := w.positive(e.vn, e.path); ok {
				x.RestartsBeforeReplace = v
			}
		case "drain":
			x.Drain = w.durationOr(e, x.Drain)
		case "unhealthy_event_after":
			x.UnhealthyEventAfter = w.durationOr(e, x.UnhealthyEventAfter)
		case "host":
			x.Host, _ = w.str(e.vn, e.path)
		case "secrets":
			x.Secrets = w.secretsPolicy(e.vn, e.path)
		case "rollout":
			x.Rollout, _ = w.str(e.vn, e.path)
		case "secret_env":
			items, _ := w.sequence(e.vn, e.path)
			for i, item := range items {
				p := index(e.path, i)
				if s, ok := w.str(item, p); ok {
					secrets = append(secrets, keyAt{name: s, path: p, node: w.resolve(item, p)})
				}
			}
		default:
			if !service(e) {
				w.unknownKey(e, slices.Concat(engenhoKeys, engenhoServiceKeys))
			}
		}
	}
	return x, secrets
}

func (w *walker) backoff(b *Backoff, n *yaml.Node, path string) {
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch e.key {
		case "immediate":
			if v, ok := w.count(e.vn, e.path); ok {
				b.Immediate = v
			}
		case "delays":
			items, ok := w.sequence(e.vn, e.path)
			if !ok {
				continue
			}
			delays := make([]time.Duration, 0, len(items))
			good := true
			for i, item := range items {
				d, ok := w.duration(item, index(e.path, i))
				good = good && ok
				delays = append(delays, d)
			}
			if good {
				b.Delays = delays
			}
		case "cap":
			b.Cap = w.durationOr(e, b.Cap)
		case "jitter":
			if v, ok := w.number(e.vn, e.path, false); ok {
				b.Jitter = v
			}
		default:
			w.unknownKey(e, backoffKeys)
		}
	}
}
