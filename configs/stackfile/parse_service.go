package stackfile

import (
	"go.yaml.in/yaml/v3"
)

var serviceKeys = []string{
	"command", "args", "image", "env", "environment", "env_file", "working_dir", "user", "ports",
	"healthcheck", "depends_on", "deploy", "driver", "hibernate", "sidecars",
	"stop_grace_period", "x-engenho", "volumes", "secrets",
	// Compose's service-level resource keys (parse_resources.go).
	"mem_limit", "mem_reservation", "cpus", "pids_limit",
}

// service reads one service, starting from the defaults.
func (w *walker) service(name string, n *yaml.Node, path string) Service {
	svc := NewService(name)
	entries, ok := w.mapping(n, path)
	if !ok {
		return svc
	}
	var (
		graceSet  bool
		secretEnv []keyAt
		res       resourceKeys
		envs      envKeys
		compose   composeState
	)
	for _, e := range entries {
		switch e.key {
		case "env", "environment", "env_file":
			envs.read(w, e)
		case "command":
			svc.Command = w.serviceCommand(&compose, e)
		case "args":
			svc.Args, _ = w.strList(e.vn, e.path)
			w.checkArgvVars(e.vn, e.path, svc.Args)
		case "image":
			svc.Image, _ = w.str(e.vn, e.path)
		case "working_dir":
			svc.WorkingDir, _ = w.str(e.vn, e.path)
		case "user":
			svc.User, _ = w.str(e.vn, e.path)
		case "ports":
			svc.Ports = w.ports(e.vn, e.path)
		case "healthcheck":
			svc.Healthcheck = w.healthcheck(e.vn, e.path)
		case "depends_on":
			svc.DependsOn = w.dependsOn(e.vn, e.path)
		case "deploy":
			svc.Deploy = w.deploy(e.vn, e.path)
		case "driver", "hibernate", "sidecars":
			w.engenhoServiceKey(&svc, e)
		case "stop_grace_period":
			svc.StopGracePeriod, graceSet = w.duration(e.vn, e.path)
			if !graceSet {
				svc.StopGracePeriod = DefaultStopGrace
			}
		case "x-engenho":
			svc.Engenho, secretEnv = w.engenho(e.vn, e.path, func(x entry) bool { return w.engenhoServiceKey(&svc, x) })
		case "volumes":
			svc.Volumes = w.serviceVolumes(e.vn, e.path)
		case "secrets":
			svc.Secrets = w.serviceSecrets(e.vn, e.path, w.secretDefs)
		default:
			if isResourceKey(e.key) {
				w.serviceResource(&res, e)
			} else if !isExtension(e.key) && !w.composeKey(&svc, &compose, e) {
				w.unknownKey(e, serviceKeys)
			}
		}
	}
	svc.Env = envs.merged(w, secretEnv)
	w.finishCompose(&svc, &compose, path)
	w.mergeResources(&svc, res)
	if svc.Hibernate != nil && !graceSet {
		svc.StopGracePeriod = DefaultHibernatedGrace
	}
	w.markSecrets(&svc, secretEnv, path)
	fillPortDefaults(&svc)
	return svc
}

// fillPortDefaults points an http/tcp probe and the edge at the first port
// when the file does not say which.
func fillPortDefaults(svc *Service) {
	if len(svc.Ports) == 0 {
		return
	}
	first := svc.Ports[0].Target
	hc := &svc.Healthcheck
	if (hc.Kind == ProbeHTTP || hc.Kind == ProbeTCP) && hc.Port == 0 {
		hc.Port = first
	}
	if svc.Hibernate != nil && svc.Hibernate.Port == 0 {
		svc.Hibernate.Port = first
	}
}

// keyAt is a name and where it was written.
type keyAt struct {
	name string
	path string
	node *yaml.Node
}

// markSecrets applies x-engenho.secret_env to the service's and its
// sidecars' env.
func (w *walker) markSecrets(svc *Service, keys []keyAt, path string) {
	for _, k := range keys {
		found := markSecret(svc.Env, k.name)
		for _, sc := range svc.Sidecars {
			found = markSecret(sc.Env, k.name) || found
		}
		if !found {
			w.problem(k.node, k.path, ErrValue, "%s is not set in env of this service or its sidecars", k.name)
		}
	}
}

func markSecret(env Env, key string) bool {
	v, ok := env[key]
	if ok {
		v.secret = true
		env[key] = v
	}
	return ok
}

// command reads `command`: a string (split like a shell) or a list.
func (w *walker) command(n *yaml.Node, path string) []string {
	r := w.resolve(n, path)
	if r == nil {
		return nil
	}
	var argv []string
	if r.Kind == yaml.ScalarNode {
		s, ok := w.str(r, path)
		if !ok {
			return nil
		}
		words, err := splitCommand(s)
		if err != nil {
			w.problem(r, path, ErrValue, "%v", err)
			return nil
		}
		if op := shellOperator(s); op != "" {
			w.warn(r, path, "%s is passed to the program as an argument: a command string runs no shell (as in Compose); write [sh, -c, \"...\"] to run one", quote(op))
		}
		argv = words
	} else {
		var ok bool
		if argv, ok = w.strList(r, path); !ok {
			return nil
		}
	}
	if len(argv) == 0 {
		w.problem(r, path, ErrValue, "empty command")
		return nil
	}
	if argv[0] == "" {
		w.problem(r, path, ErrValue, "the program (first word) is empty")
		return nil
	}
	w.checkArgvVars(r, path, argv)
	return argv
}

func (w *walker) checkArgvVars(n *yaml.Node, path string, argv []string) {
	for _, a := range argv {
		if err := checkVars(a); err != nil {
			w.problem(n, path, ErrValue, "%v", err)
			return
		}
	}
}

// env reads `env`: a map of NAME: value or {value, secret}, or a list of
// "NAME=value". Values are never quoted in messages (SEC-2).
func (w *walker) env(n *yaml.Node, path string) Env {
	r := w.resolve(n, path)
	if r == nil {
		return nil
	}
	env := Env{}
	if r.Kind == yaml.SequenceNode {
		items, _ := w.sequence(r, path)
		for i, item := range items {
			w.envItem(env, item, index(path, i), path)
		}
		return env
	}
	if r.Kind != yaml.MappingNode {
		w.problem(r, path, ErrType, "want a map or a list of NAME=value, got %s", describeKind(r))
		return nil
	}
	entries, _ := w.mapping(r, path)
	for _, e := range entries {
		if !validEnvName(e.key) {
			w.problem(e.kn, e.path, ErrValue, "%s", envNameProblem(e.key))
			continue
		}
		if r := w.resolve(e.vn, e.path); r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!null" {
			w.at(r, e.path)
			w.fromEnvironment(env, r, e.path, e.key)
			continue
		}
		if v, ok := w.envValue(e.vn, e.path, e.key); ok {
			env[e.key] = v
		}
	}
	return env
}

// envItem reads one "NAME=value" of the list form.
func (w *walker) envItem(env Env, item *yaml.Node, itemPath, path string) {
	item = w.resolve(item, itemPath)
	if item == nil {
		return
	}
	if item.Kind != yaml.ScalarNode || item.ShortTag() == "!!null" {
		w.problem(item, itemPath, ErrType, "want NAME=value, got %s", describeKind(item))
		return
	}
	name, value, hasValue := cutEnv(item.Value)
	if !validEnvName(name) {
		if len(name) > 256 {
			w.problem(item, itemPath, ErrValue, "%s", envNameProblem(name))
		} else {
			w.problem(item, itemPath, ErrValue, "invalid variable name (want NAME=value with NAME [A-Za-z_][A-Za-z0-9_.-]*)")
		}
		return
	}
	key := join(path, name)
	if _, dup := env[name]; dup {
		if at, ok := w.pos[key]; ok {
			w.problem(item, key, ErrValue, "variable given twice (first at line %d)", at.line)
		} else {
			w.problem(item, key, ErrValue, "variable given twice")
		}
		return
	}
	w.at(item, key)
	if !hasValue {
		w.fromEnvironment(env, item, key, name)
		return
	}
	env[name] = Plain(value)
}

// fromEnvironment gives a variable written without a value the value it
// has in the apply environment (or .env), as Compose takes it from the
// shell. Unset there, it is left out of the instance's environment, with
// a warning: never a silent empty string.
func (w *walker) fromEnvironment(env Env, n *yaml.Node, key, name string) {
	if v, ok := w.lookup(name); ok {
		env[name] = Plain(v)
		return
	}
	if w.unsetEnv != nil {
		w.unsetEnv[name] = true
	}
	w.warn(n, key, "%s has no value here and is not set in the apply environment or .env: left unset", name)
}

func cutEnv(s string) (name, value string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

var envValueKeys = []string{"value", "secret"}

// envValue reads a map-form value: a scalar, or {value: ..., secret: true}.
func (w *walker) envValue(n *yaml.Node, path, name string) (EnvValue, bool) {
	r := w.resolve(n, path)
	if r == nil {
		return EnvValue{}, false
	}
	w.at(r, path)
	switch {
	case r.Kind == yaml.ScalarNode:
		return Plain(r.Value), true
	case r.Kind != yaml.MappingNode:
		w.problem(r, path, ErrType, "want a value or {value: ..., secret: true}, got %s", describeKind(r))
		return EnvValue{}, false
	}
	entries, _ := w.mapping(r, path)
	var (
		v        EnvValue
		hasValue bool
		secret   bool
		allRight = true
	)
	for _, e := range entries {
		switch e.key {
		case "value":
			s := w.resolve(e.vn, e.path)
			if s == nil || s.Kind != yaml.ScalarNode || s.ShortTag() == "!!null" {
				if s != nil {
					w.problem(s, e.path, ErrType, "want a value, got %s", describeKind(s))
				}
				allRight = false
				continue
			}
			v.value, hasValue = s.Value, true
		case "secret":
			var ok bool
			secret, ok = w.boolean(e.vn, e.path)
			allRight = allRight && ok
		default:
			w.unknownKey(e, envValueKeys)
			allRight = false
		}
	}
	if !hasValue && allRight {
		w.problem(r, join(path, "value"), ErrMissing, "required")
		return EnvValue{}, false
	}
	v.secret = secret
	return v, allRight && hasValue
}
