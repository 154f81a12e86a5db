package stackfile

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrUnsupported: a Compose key engenho cannot honour (build:, a UDP
// port, volumes for now). One problem per key, with what to do instead.
var ErrUnsupported = errors.New("unsupported")

// tcpOnly is the one line for a port that is not TCP: a problem of kind
// ErrUnsupported.
func tcpOnly(proto string) error {
	return unsupported("TCP only: engenho's balancer, probes and edge carry TCP, not " + quote(proto))
}

// unsupported is a message that is an ErrUnsupported (errors.Is).
type unsupported string

func (u unsupported) Error() string        { return string(u) }
func (u unsupported) Is(target error) bool { return target == ErrUnsupported }

// Compose keys engenho does not honour, and what it does with each
// (docs/stackfile.md has the same table for users).
type keyRule struct {
	refuse bool   // an error; otherwise a warning and the key is ignored
	reason string // the message
}

const (
	notYet      = "not supported yet"
	sharedNet   = "all services share the node's network; networks are ignored"
	useResource = "ignored: engenho limits cpus, memory and pids only (cpus, mem_limit, mem_reservation, pids_limit, deploy.resources)"
)

// composeServiceRules are the service keys of the Compose spec that are
// not honoured; the honoured ones are in serviceKeys and composeKey.
var composeServiceRules = map[string]keyRule{
	"build":               {true, "build the image first, then reference it with image:"},
	"volumes_from":        {true, notYet},
	"configs":             {true, notYet},
	"tmpfs":               {true, notYet + " (a mount, like volumes)"},
	"extends":             {true, "write the service out in full, or share keys with a YAML anchor and merge key (<<)"},
	"privileged":          {true, "engenho never runs an instance privileged"},
	"cap_add":             {true, "engenho grants no capabilities; the workload would not have what it asks for"},
	"cap_drop":            {true, "engenho cannot drop capabilities per service; ignoring it would run the workload with more than it asked for"},
	"security_opt":        {true, "engenho cannot apply per-service security options; ignoring them would weaken what was asked for"},
	"read_only":           {true, "engenho cannot make a service's file system read-only; ignoring it would weaken what was asked for"},
	"userns_mode":         {true, "engenho chooses the user namespace by driver (incus: unprivileged containers)"},
	"devices":             {true, "engenho gives instances no host devices"},
	"device_cgroup_rules": {true, "engenho gives instances no host devices"},
	"gpus":                {true, "engenho gives instances no GPUs"},
	"sysctls":             {true, "sysctls are node-wide on the shared network; set them on the node"},
	"group_add":           {true, "engenho sets no supplementary groups; use user: USER:GROUP"},
	"post_start":          {true, "lifecycle hooks are not supported; use a sidecar or the command itself"},
	"pre_stop":            {true, "lifecycle hooks are not supported; the workload gets SIGTERM and stop_grace_period"},
	"pre_start":           {true, "lifecycle hooks are not supported; run the step in the command itself (sh -c 'step && exec server')"},
	"umask":               {true, "engenho cannot set a per-service umask; ignoring it would create files with other permissions than asked: set it in the command (sh -c 'umask 027; exec server')"},
	"label_file":          {true, notYet + "; write the labels under labels"},
	"provider":            {true, "engenho runs commands and images, not providers"},
	"models":              {true, "engenho runs commands and images, not models"},
	"use_api_socket":      {true, "engenho has no Docker API socket to give"},
	"runtime":             {true, "the driver decides how an instance runs; use driver (or x-engenho.driver)"},

	"networks":           {false, sharedNet},
	"links":              {false, "ignored: all services share the node's network; reach another service on its port at 127.0.0.1"},
	"external_links":     {false, "ignored: all services share the node's network"},
	"hostname":           {false, "ignored: instances have the node's host name (process) or the driver's (incus)"},
	"domainname":         {false, "ignored: instances use the node's domain name"},
	"mac_address":        {false, "ignored: " + sharedNet},
	"dns":                {false, "ignored: instances use the node's resolver"},
	"dns_search":         {false, "ignored: instances use the node's resolver"},
	"dns_opt":            {false, "ignored: instances use the node's resolver"},
	"extra_hosts":        {false, "ignored: instances use the node's /etc/hosts"},
	"ipc":                {false, "ignored: the driver decides the IPC namespace"},
	"pid":                {false, "ignored: the driver decides the PID namespace"},
	"uts":                {false, "ignored: the driver decides the UTS namespace"},
	"stdin_open":         {false, "ignored: instances have no terminal; output goes to engenho's logs"},
	"tty":                {false, "ignored: instances have no terminal; output goes to engenho's logs"},
	"attach":             {false, "ignored: output always goes to engenho's logs (engenho logs)"},
	"logging":            {false, "ignored: engenho keeps every instance's output itself (engenho logs)"},
	"platform":           {false, "ignored: the image or binary must already suit the node"},
	"pull_policy":        {false, "ignored: the driver fetches an image when it is missing"},
	"pull_refresh_after": {false, "ignored: the driver fetches an image when it is missing"},
	"init":               {false, "ignored: engenho supervises the workload itself; no init is added"},
	"stop_signal":        {false, "ignored: engenho stops with SIGTERM, then SIGKILL after stop_grace_period"},
	"ulimits":            {false, "ignored: instances get the daemon's limits; pids_limit caps processes"},
	"shm_size":           {false, "ignored: instances use the driver's /dev/shm"},
	"oom_score_adj":      {false, "ignored: the driver sets OOM scores"},
	"oom_kill_disable":   {false, "ignored: the driver handles out-of-memory kills"},
	"mem_swappiness":     {false, useResource},
	"memswap_limit":      {false, useResource},
	"cpu_count":          {false, useResource},
	"cpu_percent":        {false, useResource},
	"cpu_shares":         {false, useResource},
	"cpu_period":         {false, useResource},
	"cpu_quota":          {false, useResource},
	"cpu_rt_period":      {false, useResource},
	"cpu_rt_runtime":     {false, useResource},
	"cpuset":             {false, useResource},
	"blkio_config":       {false, useResource},
	"cgroup":             {false, "ignored: the driver places instances in cgroups"},
	"cgroup_parent":      {false, "ignored: the driver places instances in cgroups"},
	"storage_opt":        {false, "ignored: the driver decides storage"},
	"isolation":          {false, "ignored: a Windows container setting"},
	"credential_spec":    {false, "ignored: a Windows container setting"},
	"annotations":        {false, "ignored: use labels, which engenho stores on instances"},
	"develop":            {false, "ignored: a development-only setting (docker compose watch)"},
	"network_mode":       {false, sharedNet},
}

// composeTopRules are the top-level Compose keys besides name, version,
// services and x-*.
var composeTopRules = map[string]keyRule{
	"configs":  {true, notYet},
	"include":  {true, notYet + "; give every file to engenho apply"},
	"models":   {true, "engenho runs commands and images, not models"},
	"jobs":     {true, "engenho runs long-lived services; run a one-off job as a service with restart: no"},
	"networks": {false, sharedNet},
}

// composeDeployRules are the deploy keys of Compose engenho does not
// honour.
var composeDeployRules = map[string]keyRule{
	"placement":       {false, "ignored: engenho runs every service on this node"},
	"labels":          {false, "ignored: service-level (swarm) labels; labels under the service are stored on instances"},
	"endpoint_mode":   {false, "ignored: the node's balancer reaches every instance"},
	"rollback_config": {false, "ignored: a rollback uses update_config"},
}

// topKey handles a top-level Compose key; false when it is not one.
func (w *walker) topKey(e entry) bool {
	rule, ok := composeTopRules[e.key]
	if !ok {
		return false
	}
	w.applyRule(e, rule)
	return true
}

func (w *walker) applyRule(e entry, rule keyRule) {
	if rule.refuse {
		w.problem(e.kn, e.path, ErrUnsupported, "%s", rule.reason)
		return
	}
	if e.key == "network_mode" {
		if s := w.resolve(e.vn, e.path); s != nil && s.Kind == yaml.ScalarNode && s.Value == "host" {
			return // what engenho does anyway
		}
	}
	w.warn(e.kn, e.path, "%s", rule.reason)
}

// deployKey handles a Compose deploy key engenho does not have; false
// when it is not one.
func (w *walker) deployKey(d *Deploy, e entry) bool {
	if e.key == "mode" {
		if s, ok := w.str(e.vn, e.path); ok {
			switch s {
			case "replicated":
			case "global":
				// One node: global is one instance (settled in the last
				// pass, whatever order the keys come in).
				d.global = true
			default:
				w.problem(e.vn, e.path, ErrValue, "want replicated or global, got %s", quote(s))
			}
		}
		return true
	}
	rule, ok := composeDeployRules[e.key]
	if !ok {
		return false
	}
	w.applyRule(e, rule)
	return true
}

// composePortKey reads the Compose long-form port keys engenho has no
// use for: name and app_protocol are descriptions (kept by nobody, no
// warning); mode is a swarm setting, ignored with a warning.
func (w *walker) composePortKey(e entry) bool {
	switch e.key {
	case "name", "app_protocol":
		w.str(e.vn, e.path)
	case "mode":
		if s, ok := w.str(e.vn, e.path); ok && s != "host" && s != "ingress" {
			w.problem(e.vn, e.path, ErrValue, "want host or ingress, got %s", quote(s))
		} else if ok {
			w.warn(e.kn, e.path, "ignored: the node's balancer publishes the port")
		}
	default:
		return false
	}
	return true
}

// composeState collects a service's Compose keys whose meaning depends on
// other keys; finishCompose applies them once the whole service is read.
type composeState struct {
	restart       *entry
	restartPolicy RestartPolicy
	restartMax    bool // restart: on-failure:N
	entrypoint    []string
	hasEntrypoint bool
	containerName *entry
	scale         *entry
	scaleValue    int
	emptyCommand  *yaml.Node // command: [] or "", allowed after an entrypoint
}

// serviceCommand reads a service's command. An empty one (`[]`, `""`) is
// Compose's "no arguments to the entrypoint": finishCompose refuses it
// when there is no entrypoint.
func (w *walker) serviceCommand(cs *composeState, e entry) []string {
	if r := w.resolve(e.vn, e.path); r != nil && (r.Kind == yaml.SequenceNode && len(r.Content) == 0 ||
		r.Kind == yaml.ScalarNode && r.ShortTag() == "!!str" && strings.TrimSpace(r.Value) == "") {
		w.at(r, e.path)
		cs.emptyCommand = r
		return nil
	}
	return w.command(e.vn, e.path)
}

// composeKey reads a Compose service key engenho honours, or applies the
// rule of one it does not; false when key is no Compose key at all.
func (w *walker) composeKey(svc *Service, cs *composeState, e entry) bool {
	switch e.key {
	case "restart":
		cs.restart = &e
		cs.restartPolicy, cs.restartMax = w.restartKey(e)
	case "entrypoint":
		cs.entrypoint, cs.hasEntrypoint = w.entrypoint(e.vn, e.path)
	case "expose":
		svc.Expose = w.expose(e.vn, e.path)
	case "labels":
		svc.Labels = w.labels(e.vn, e.path)
	case "container_name":
		if s, ok := w.str(e.vn, e.path); ok {
			if !validContainerName(s) {
				w.problem(e.vn, e.path, ErrValue, "want [a-zA-Z0-9][a-zA-Z0-9_.-]* (at most 253 characters), got %s", quote(s))
			} else {
				svc.ContainerName = s
				cs.containerName = &e
			}
		}
	case "profiles":
		svc.Profiles = w.profiles(e.vn, e.path)
	case "scale":
		if v, ok := w.count(e.vn, e.path); ok {
			cs.scale, cs.scaleValue = &e, v
		}
	default:
		rule, ok := composeServiceRules[e.key]
		if !ok {
			return false
		}
		w.applyRule(e, rule)
	}
	return true
}

// restartKey reads Compose's restart: no, always, on-failure[:N],
// unless-stopped, as the deploy.restart_policy it means.
func (w *walker) restartKey(e entry) (RestartPolicy, bool) {
	s, ok := w.str(e.vn, e.path)
	if !ok {
		return RestartPolicy{}, false
	}
	switch s {
	case "no":
		return RestartPolicy{Condition: RestartNone}, false
	case "always", "unless-stopped":
		return RestartPolicy{Condition: RestartAny}, false
	case "on-failure":
		return RestartPolicy{Condition: RestartOnFailure}, false
	}
	if n, found := strings.CutPrefix(s, "on-failure:"); found {
		if v, err := strconv.Atoi(n); err == nil && allDigits(n) && v <= MaxRestartAttempts {
			return RestartPolicy{Condition: RestartOnFailure, MaxAttempts: v}, true
		}
		w.problem(e.vn, e.path, ErrValue, "want on-failure:N with N a number of restarts (0..%d), got %s", MaxRestartAttempts, quote(s))
		return RestartPolicy{}, false
	}
	w.problem(e.vn, e.path, ErrValue, "want no, always, on-failure, on-failure:N or unless-stopped, got %s", quote(s))
	return RestartPolicy{}, false
}

// MaxRestartAttempts bounds on-failure:N.
const MaxRestartAttempts = 1 << 20

// entrypoint reads `entrypoint`: a string (split like a shell) or a
// list; "" and [] clear it (Compose: no entrypoint, run the command
// itself).
func (w *walker) entrypoint(n *yaml.Node, path string) ([]string, bool) {
	r := w.resolve(n, path)
	if r == nil {
		return nil, false
	}
	w.at(r, path)
	var argv []string
	switch {
	case r.Kind == yaml.ScalarNode && r.ShortTag() != "!!null":
		words, err := splitCommand(r.Value)
		if err != nil {
			w.problem(r, path, ErrValue, "%v", err)
			return nil, false
		}
		argv = words
	case r.Kind == yaml.SequenceNode:
		var ok bool
		if argv, ok = w.strList(r, path); !ok {
			return nil, false
		}
	default:
		w.problem(r, path, ErrType, "want a string or a list of strings, got %s", describe(r))
		return nil, false
	}
	if len(argv) > 0 && argv[0] == "" {
		w.problem(r, path, ErrValue, "the program (first word) is empty")
		return nil, false
	}
	w.checkArgvVars(r, path, argv)
	return argv, true
}

// expose reads `expose`: ports or ranges ("80", "8000-8010", 80), TCP.
func (w *walker) expose(n *yaml.Node, path string) []string {
	items, ok := w.sequence(n, path)
	if !ok {
		return nil
	}
	var out []string
	for i, item := range items {
		p := index(path, i)
		s, ok := w.str(item, p)
		if !ok {
			continue
		}
		spec, proto, hasProto := strings.Cut(s, "/")
		if hasProto && proto != "tcp" {
			w.problem(w.resolve(item, p), p, ErrUnsupported, "%v", tcpOnly(proto))
			continue
		}
		from, to, isRange := strings.Cut(spec, "-")
		a, err := portNumber(from)
		b := a
		if err == nil && isRange {
			b, err = portNumber(to)
			if err == nil && b < a {
				err = fmt.Errorf("range %s ends before it starts", quote(spec))
			}
		}
		if err != nil {
			w.problem(w.resolve(item, p), p, ErrValue, "want a port or a range like 8000-8010: %v", err)
			continue
		}
		if a == b {
			out = append(out, strconv.Itoa(a))
		} else {
			out = append(out, strconv.Itoa(a)+"-"+strconv.Itoa(b))
		}
	}
	return out
}

// labels reads `labels`: a map of key: value or a list of "key=value"
// ("key" alone is an empty value, as in Compose).
func (w *walker) labels(n *yaml.Node, path string) map[string]string {
	r := w.resolve(n, path)
	if r == nil {
		return nil
	}
	out := map[string]string{}
	add := func(node *yaml.Node, key, name, value string) {
		switch {
		case !validLabelKey(name):
			w.problem(node, key, ErrValue, "invalid label key %s (want letters, digits, '.', '-', '_' and '/', starting with a letter or digit, at most 128)", quote(name))
		case strings.HasPrefix(name, LabelPrefix):
			w.problem(node, key, ErrValue, "label keys starting with %q are engenho's own", LabelPrefix)
		case strings.ContainsRune(value, 0) || len(value) > maxLabelValue:
			w.problem(node, key, ErrValue, "a label value holds no NUL byte and is at most %d bytes", maxLabelValue)
		default:
			if _, dup := out[name]; dup {
				w.problem(node, key, ErrValue, "label %s given twice", quote(name))
				return
			}
			w.at(node, key)
			out[name] = value
		}
	}
	if r.Kind == yaml.SequenceNode {
		items, _ := w.sequence(r, path)
		for i, item := range items {
			p := index(path, i)
			if s, ok := w.str(item, p); ok {
				name, value, _ := strings.Cut(s, "=")
				add(w.resolve(item, p), p, name, value)
			}
		}
		return out
	}
	entries, ok := w.mapping(r, path)
	if !ok {
		return nil
	}
	for _, e := range entries {
		v := w.resolve(e.vn, e.path)
		switch {
		case v == nil:
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null":
			add(e.kn, e.path, e.key, "")
		case v.Kind == yaml.ScalarNode:
			add(e.kn, e.path, e.key, v.Value)
		default:
			w.problem(v, e.path, ErrType, "want a string, got %s", describe(v))
		}
	}
	return out
}

const maxLabelValue = 4096

func validLabelKey(s string) bool {
	if s == "" || len(s) > 128 || !(isLetter(s[0]) || isDigit(s[0])) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(isLetter(c) || isDigit(c) || c == '.' || c == '-' || c == '_' || c == '/') {
			return false
		}
	}
	return true
}

// validContainerName is Compose's [a-zA-Z0-9][a-zA-Z0-9_.-]*.
func validContainerName(s string) bool {
	if s == "" || len(s) > 253 || !(isLetter(s[0]) || isDigit(s[0])) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(isLetter(c) || isDigit(c) || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// profiles reads `profiles`: names [a-zA-Z0-9][a-zA-Z0-9_.-]*.
func (w *walker) profiles(n *yaml.Node, path string) []string {
	names, _ := w.strList(n, path)
	var out []string
	for i, s := range names {
		if !validContainerName(s) || len(s) > 63 {
			w.problem(n, index(path, i), ErrValue, "invalid profile name %s (want [a-zA-Z0-9][a-zA-Z0-9_.-]*, at most 63)", quote(s))
			continue
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// finishCompose applies what needs the whole service: restart against
// deploy.restart_policy, entrypoint with command, scale against
// deploy.replicas, container_name against replicas, and engenho's own
// keys given both at the service and under x-engenho.
func (w *walker) finishCompose(svc *Service, cs *composeState, path string) {
	if cs.restart != nil && cs.restartPolicy.Condition != "" {
		w.mergeRestart(svc, cs, path)
	}
	if cs.emptyCommand != nil && !cs.hasEntrypoint {
		w.problem(cs.emptyCommand, join(path, "command"), ErrValue, "empty command")
	}
	if cs.hasEntrypoint {
		// Compose: the entrypoint is the program, the command its
		// arguments; args (engenho's) follow.
		args := append(slices.Clip(svc.Command), svc.Args...)
		svc.Command = cs.entrypoint
		if len(svc.Command) == 0 {
			svc.Command, args = args, nil
		}
		svc.Args = args
		if len(svc.Args) == 0 {
			svc.Args = nil
		}
	}
	replicasKey := join(path, "deploy.replicas")
	if cs.scale != nil {
		if at, ok := w.pos[replicasKey]; ok && svc.Deploy.Replicas != cs.scaleValue {
			w.problem(cs.scale.kn, cs.scale.path, ErrValue, "scale: %d disagrees with deploy.replicas: %d at line %d; give one", cs.scaleValue, svc.Deploy.Replicas, at.line)
		} else {
			svc.Deploy.Replicas = cs.scaleValue
			replicasKey = cs.scale.path
		}
	}
	if svc.Deploy.global {
		if at, ok := w.pos[replicasKey]; ok && svc.Deploy.Replicas != 1 {
			w.problems = append(w.problems, Problem{File: w.file, Line: at.line, Column: at.col, Key: replicasKey, Err: ErrValue,
				Msg: fmt.Sprintf("%d replicas, but deploy.mode is global: one instance on this node; drop one of the two", svc.Deploy.Replicas)})
		}
		svc.Deploy.Replicas = 1
	}
	if cs.containerName != nil && svc.Deploy.Replicas > 1 {
		line := cs.containerName.kn.Line
		w.problem(cs.containerName.kn, cs.containerName.path, ErrValue, "names one instance, but replicas is %d; drop container_name or run one replica", svc.Deploy.Replicas)
		if at, ok := w.pos[replicasKey]; ok {
			w.problems = append(w.problems, Problem{File: w.file, Line: at.line, Column: at.col, Key: replicasKey, Err: ErrValue,
				Msg: fmt.Sprintf("%d replicas, but container_name at line %d names one instance", svc.Deploy.Replicas, line)})
		}
	}
	for _, key := range engenhoServiceKeys {
		inX := join(path, "x-engenho."+key)
		own, isOwn := w.pos[join(path, key)]
		if at, ok := w.pos[inX]; ok && isOwn {
			w.problems = append(w.problems, Problem{File: w.file, Line: at.line, Column: at.col, Key: inX, Err: ErrValue,
				Msg: fmt.Sprintf("%s is given twice: at line %d and under x-engenho at line %d; give one", key, own.line, at.line)})
		}
	}
}

// mergeRestart settles Compose's restart with deploy.restart_policy:
// restart sets the condition (and, for on-failure:N, max_attempts);
// deploy.restart_policy keeps its other keys. Both saying different
// things is an error naming both lines.
func (w *walker) mergeRestart(svc *Service, cs *composeState, path string) {
	rp := &svc.Deploy.RestartPolicy
	policy := join(path, "deploy.restart_policy")
	conflict := func(key, mine, theirs string) bool {
		at, ok := w.pos[join(policy, key)]
		if !ok || mine == theirs {
			return false
		}
		w.problem(cs.restart.vn, cs.restart.path, ErrValue, "restart means deploy.restart_policy.%s: %s, but line %d gives %s; give one", key, mine, at.line, theirs)
		w.problems = append(w.problems, Problem{File: w.file, Line: at.line, Column: at.col, Key: join(policy, key), Err: ErrValue,
			Msg: fmt.Sprintf("disagrees with restart at line %d; give one", cs.restart.kn.Line)})
		return true
	}
	if conflict("condition", cs.restartPolicy.Condition, rp.Condition) {
		return
	}
	if cs.restartMax && conflict("max_attempts", strconv.Itoa(cs.restartPolicy.MaxAttempts), strconv.Itoa(rp.MaxAttempts)) {
		return
	}
	rp.Condition = cs.restartPolicy.Condition
	if cs.restartMax {
		rp.MaxAttempts = cs.restartPolicy.MaxAttempts
	}
}

// engenhoServiceKeys are engenho's own service keys that x-engenho also
// takes, so that an engenho stack file is a valid Compose file.
var engenhoServiceKeys = []string{"driver", "hibernate", "sidecars"}

// engenhoServiceKey reads one of engenhoServiceKeys, in the service or
// under its x-engenho.
func (w *walker) engenhoServiceKey(svc *Service, e entry) bool {
	switch e.key {
	case "driver":
		svc.Driver, _ = w.str(e.vn, e.path)
	case "hibernate":
		h := w.hibernate(e.vn, e.path)
		svc.Hibernate = &h
	case "sidecars":
		svc.Sidecars = w.sidecars(e.vn, e.path)
	default:
		return false
	}
	return true
}

// healthEngenho reads healthcheck.x-engenho: engenho's http and tcp
// probes, where a Compose file can hold them. It returns the probes given.
func (w *walker) healthEngenho(hc *Healthcheck, e entry) []string {
	entries, _ := w.mapping(e.vn, e.path)
	var probes []string
	for _, x := range entries {
		switch x.key {
		case "http":
			probes = append(probes, "x-engenho.http")
			hc.Kind = ProbeHTTP
			hc.Path, hc.Port = w.probeTarget(x.vn, x.path, true)
		case "tcp":
			probes = append(probes, "x-engenho.tcp")
			hc.Kind = ProbeTCP
			_, hc.Port = w.probeTarget(x.vn, x.path, false)
		default:
			w.unknownKey(x, []string{"http", "tcp"})
		}
	}
	return probes
}

// ValidServiceName reports whether s is a valid service name:
// [a-z0-9][a-z0-9_-]{0,62}, a ValidName that may also hold "_" (Compose
// allows it; instance names write it "-"). It cannot hold a path
// separator or a dot, so it is safe in a file path (SEC-3). Compose's
// upper-case letters and dots are refused: instance and host names are
// lower-case, and a dot would let a name read as "..".
func ValidServiceName(s string) bool {
	return ValidName(strings.ReplaceAll(s, "_", "-"))
}

// composeStack applies what needs every service: profiles (a service
// with profiles is in the stack only when one of them is active) and
// dependencies with required: false on a service that is not there.
func (w *walker) composeStack(st *Stack) {
	disabled := map[string][]string{}
	order := st.Order[:0:0]
	for _, name := range st.Order {
		svc := st.Services[name]
		if profileActive(svc.Profiles, w.activeProfiles) {
			order = append(order, name)
			continue
		}
		disabled[name] = svc.Profiles
		delete(st.Services, name)
	}
	if len(order) == 0 && len(disabled) > 0 {
		active := "none is active"
		if len(w.activeProfiles) > 0 {
			active = "active: " + strings.Join(w.activeProfiles, ", ")
		}
		w.problem(nil, "services", ErrMissing, "no service is enabled: every service has profiles, and %s (engenho apply --profile NAME)", active)
		if at, ok := w.pos["services"]; ok {
			w.problems[len(w.problems)-1].Line, w.problems[len(w.problems)-1].Column = at.line, at.col
		}
	}
	st.Order = order
	for _, name := range order {
		svc := st.Services[name]
		path := "services." + name + ".depends_on"
		kept := svc.DependsOn[:0:0]
		for i, d := range svc.DependsOn {
			key := index(path, i)
			at := w.pos[key]
			profiles, off := disabled[d.Service]
			_, exists := st.Services[d.Service]
			switch {
			case off && !d.Optional:
				w.problems = append(w.problems, Problem{File: w.file, Line: at.line, Column: at.col, Key: key, Err: ErrDependency,
					Msg: fmt.Sprintf("%s is not enabled: its profiles are %s and none is active; activate one (engenho apply --profile %s) or give it required: false", d.Service, strings.Join(profiles, ", "), profiles[0])})
				continue
			case off:
				w.warnings = append(w.warnings, Problem{File: w.file, Line: at.line, Column: at.col, Key: key, Err: ErrWarning,
					Msg: fmt.Sprintf("%s is not enabled by a profile; required: false, so %s starts without it", d.Service, name)})
				continue
			case !exists && d.Optional && d.Service != name:
				w.warnings = append(w.warnings, Problem{File: w.file, Line: at.line, Column: at.col, Key: key, Err: ErrWarning,
					Msg: fmt.Sprintf("no service %s in this stack; required: false, so %s starts without it", quote(d.Service), name)})
				continue
			}
			if j := len(kept); j != i {
				// Keep the checker's positions on the entries that stay.
				w.pos[index(path, j)] = at
			}
			kept = append(kept, d)
		}
		if len(kept) == 0 {
			kept = nil
		}
		svc.DependsOn = kept
		st.Services[name] = svc
	}
}

// profileActive: no profiles, or one of them active ("*" activates all).
func profileActive(profiles, active []string) bool {
	if len(profiles) == 0 || slices.Contains(active, "*") {
		return true
	}
	for _, p := range profiles {
		if slices.Contains(active, p) {
			return true
		}
	}
	return false
}

// instanceNameClashes: two services whose names meet once "_" is written
// "-" in instance names, and two services with one container_name.
func (c *checker) instanceNameClashes(st *Stack) {
	names, containers := map[string]string{}, map[string]string{}
	for _, name := range st.Order {
		svc, ok := st.Services[name]
		if !ok {
			continue
		}
		in := instanceService(name)
		if other, taken := names[in]; taken && other != name {
			c.add("services."+name, ErrValue, "service %s and service %s would both name their instances %s-...: rename one", quote(name), quote(other), in)
		}
		names[in] = name
		if cn := svc.ContainerName; cn != "" {
			if other, taken := containers[cn]; taken {
				c.add("services."+name+".container_name", ErrValue, "container name %s is also used by service %s", quote(cn), other)
			}
			containers[cn] = name
		}
	}
}

// composeService checks a service's Compose fields as values (a stack
// from the journal as much as one from a file).
func (c *checker) composeService(p string, svc Service) {
	for _, k := range sortedKeys(svc.Labels) {
		switch {
		case !validLabelKey(k):
			c.add(p+".labels", ErrValue, "invalid label key %s", quote(k))
		case strings.HasPrefix(k, LabelPrefix):
			c.add(p+".labels."+k, ErrValue, "label keys starting with %q are engenho's own", LabelPrefix)
		}
	}
	if svc.ContainerName != "" {
		if !validContainerName(svc.ContainerName) {
			c.add(p+".container_name", ErrValue, "want [a-zA-Z0-9][a-zA-Z0-9_.-]*, got %s", quote(svc.ContainerName))
		}
		if svc.Deploy.Replicas > 1 {
			c.add(p+".container_name", ErrValue, "names one instance, but replicas is %d", svc.Deploy.Replicas)
		}
	}
}

// serviceNameProblem says what is wrong with a service name that is not
// [a-z0-9][a-z0-9_-]{0,62}.
func serviceNameProblem(s string) string {
	return fmt.Sprintf("invalid service name %s: %s (want [a-z0-9][a-z0-9_-]{0,62}: lower-case letters, digits, - and _)", quote(s), whyBadName(s, false, true))
}
