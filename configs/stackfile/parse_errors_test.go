package stackfile

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// SVC-1: unknown keys, wrong types and bad values are errors naming the
// file, line and key. Each case is one mistake and must give exactly one
// problem (no cascade of consequences), at the right line and key path,
// of the right kind.
func TestParseErrorsSVC1(t *testing.T) {
	cases := []struct {
		name string
		body string
		cmd  bool
		key  string // path below services.api ("" = services.api itself)
		line int    // 1-based line within body
		kind error
		msg  string // substring of the message
	}{
		// service keys
		{"unknown key with a suggestion", "comand: x", false, "comand", 1, ErrUnknownKey, "did you mean command?"},
		{"Compose key engenho cannot run", "build: .", true, "build", 1, ErrUnsupported, "build the image first, then reference it with image:"},
		{"Compose volumes: a named volume must be declared", "volumes: [data:/b]", true, "volumes[0]", 1, ErrValue, `volume "data" is not declared under the top-level volumes`},
		{"nothing to run", "env: {A: b}", false, "", 0, ErrMissing, "needs command or image"},
		{"service is not a map", "", false, "", 0, ErrType, "want a map"},
		// command, args, image
		{"command map", "command: {a: b}", false, "command", 1, ErrType, "want a list, got a map"},
		{"command empty list", "command: []", false, "command", 1, ErrValue, "empty command"},
		{"command empty string", `command: ""`, false, "command", 1, ErrValue, "empty command"},
		{"command unterminated quote", `command: "run 'x"`, false, "command", 1, ErrValue, "unterminated single quote"},
		{"command nested list", "command: [[a]]", false, "command[0]", 1, ErrType, "want a string, got a list"},
		{"command null item", "command: [a, ~]", false, "command[1]", 1, ErrType, "want a string, got nothing (null)"},
		{"command unknown variable", `command: ["${ENGENHO_BN}"]`, false, "command", 1, ErrValue, "unknown variable ${ENGENHO_BN}"},
		{"command empty program", `command: ["", x]`, false, "command", 1, ErrValue, "program (first word) is empty"},
		{"args scalar", "args: --v", true, "args", 1, ErrType, "want a list"},
		{"args unknown variable", `args: ["${ENGENHO_SLOTS}"]`, true, "args", 1, ErrValue, "unknown variable"},
		{"image list", "image: [a]", false, "image", 1, ErrType, "want a string, got a list"},
		{"image with blanks", `image: "a b"`, false, "image", 1, ErrValue, "no blanks"},
		// env
		{"env scalar", "env: A=b", true, "env", 1, ErrType, "want a map or a list"},
		{"env value list", "env:\n  A: [1]", true, "env.A", 2, ErrType, "got a list"},
		{"env list no name", `env: ["=x"]`, true, "env[0]", 1, ErrValue, "invalid variable name"},
		{"env list item map", "env: [{A: b}]", true, "env[0]", 1, ErrType, "want NAME=value, got a map"},
		{"env bad name", "env:\n  1A: x", true, "env.1A", 2, ErrValue, "invalid variable name"},
		{"env list twice", "env: [A=1, A=2]", true, "env.A", 1, ErrValue, "given twice"},
		{"env map twice", "env:\n  A: 1\n  A: 2", true, "env.A", 3, ErrValue, "key given twice"},
		{"env secret not a bool", "env:\n  A: {value: x, secret: maybe}", true, "env.A.secret", 2, ErrType, `want true or false, got "maybe"`},
		{"env object without value", "env:\n  A: {secret: true}", true, "env.A.value", 2, ErrMissing, "required"},
		{"env object unknown key", "env:\n  A: {value: x, hidden: true}", true, "env.A.hidden", 2, ErrUnknownKey, "unknown key"},
		{"env reserved name", "env:\n  ENGENHO_SLOT: x", true, "env.ENGENHO_SLOT", 2, ErrValue, "set by engenho"},
		{"secret_env names nothing", "env: {A: b}\nx-engenho:\n  secret_env: [NOPE]", true, "x-engenho.secret_env[0]", 3, ErrValue, "NOPE is not set in env"},
		// working_dir, user
		{"working_dir relative", "working_dir: srv", true, "working_dir", 1, ErrValue, "clean absolute path"},
		{"working_dir unclean", "working_dir: /a/../b", true, "working_dir", 1, ErrValue, "clean absolute path"},
		{"user with blanks", `user: "a b"`, true, "user", 1, ErrValue, "USER[:GROUP]"},
		{"user empty group", `user: "a:"`, true, "user", 1, ErrValue, "USER[:GROUP]"},
		// ports
		{"ports udp", `ports: ["8080:80/udp"]`, true, "ports[0]", 1, ErrUnsupported, "TCP only"},
		{"ports range", `ports: ["8000-8010:80"]`, true, "ports[0]", 1, ErrValue, "ranges are not supported"},
		{"ports zero", `ports: ["0:80"]`, true, "ports[0]", 1, ErrValue, "outside 1..65535"},
		{"ports too big", `ports: ["70000"]`, true, "ports[0]", 1, ErrValue, "outside 1..65535"},
		{"ports too many parts", `ports: ["a:b:c:d"]`, true, "ports[0]", 1, ErrValue, "want TARGET, PUBLISHED:TARGET"},
		{"ports not a number", `ports: ["http"]`, true, "ports[0]", 1, ErrValue, `want a port number, got "http"`},
		{"ports bad IP", `ports: ["300.1.1.1:80:80"]`, true, "ports[0]", 1, ErrValue, "not an IP address"},
		{"ports random published", `ports: ["127.0.0.1::80"]`, true, "ports[0]", 1, ErrValue, "a random published port (HOST_IP::TARGET) is not supported"},
		{"ports long range", "ports:\n  - {target: 80, published: \"8083-9000\"}", true, "ports[0].published", 2, ErrValue, "port ranges are not supported"},
		{"ports bare ipv6", `ports: ["::1:80:80"]`, true, "ports[0]", 1, ErrValue, "goes in brackets"},
		{"ports long without target", "ports:\n  - {published: 80}", true, "ports[0].target", 2, ErrMissing, "required"},
		{"ports long unknown key", "ports:\n  - {target: 80, mood: host}", true, "ports[0].mood", 2, ErrUnknownKey, "unknown key"},
		{"ports long target string", "ports:\n  - {target: http}", true, "ports[0].target", 2, ErrType, "want a port number"},
		{"ports long target range", "ports:\n  - {target: 0}", true, "ports[0].target", 2, ErrValue, "outside 1..65535"},
		{"ports long host_ip unpublished", "ports:\n  - {target: 80, host_ip: 127.0.0.1}", true, "ports[0].host_ip", 2, ErrValue, "needs a published port"},
		{"ports long host_ip bad", "ports:\n  - {target: 80, published: 80, host_ip: localhost}", true, "ports[0].host_ip", 2, ErrValue, "not an IP address"},
		{"ports long udp", "ports:\n  - {target: 80, protocol: udp}", true, "ports[0].protocol", 2, ErrUnsupported, "TCP only"},
		{"ports long published bad", "ports:\n  - {target: 80, published: x}", true, "ports[0].published", 2, ErrValue, "want a port number"},
		{"ports target twice", `ports: ["80", "8080:80"]`, true, "ports[1].target", 1, ErrValue, "listed twice"},
		{"ports published twice", `ports: ["8080:80", "8080:81"]`, true, "ports[1].published", 1, ErrValue, "listed twice"},
		{"ports scalar", "ports: 80", true, "ports", 1, ErrType, "want a list"},
		// healthcheck
		{"test first item", "healthcheck:\n  test: [FOO, x]", true, "healthcheck.test", 2, ErrValue, "must be CMD, CMD-SHELL or NONE"},
		{"test empty list", "healthcheck:\n  test: []", true, "healthcheck.test", 2, ErrValue, "empty test"},
		{"test CMD alone", "healthcheck:\n  test: [CMD]", true, "healthcheck.test", 2, ErrValue, "needs a program"},
		{"test CMD-SHELL two", "healthcheck:\n  test: [CMD-SHELL, a, b]", true, "healthcheck.test", 2, ErrValue, "exactly one command string"},
		{"test NONE extra", "healthcheck:\n  test: [NONE, x]", true, "healthcheck.test", 2, ErrValue, "takes nothing after it"},
		{"test map", "healthcheck:\n  test: {a: b}", true, "healthcheck.test", 2, ErrType, "want a list"},
		{"two probes", "ports: [\"80\"]\nhealthcheck:\n  test: [CMD, x]\n  http: {port: 80}", true, "healthcheck", 3, ErrValue, "give one probe: test, http or tcp (got test and http)"},
		{"no probe", "healthcheck:\n  interval: 5s", true, "healthcheck", 2, ErrMissing, "needs a probe"},
		{"http path", "ports: [\"80\"]\nhealthcheck:\n  http: {path: healthz}", true, "healthcheck.http.path", 3, ErrValue, "starting with /"},
		{"http port not a target", "ports: [\"80\"]\nhealthcheck:\n  http: {port: 81}", true, "healthcheck.http.port", 3, ErrValue, "port 81 is not one of the service's target ports"},
		{"http without ports", "healthcheck:\n  http: {path: /}", true, "healthcheck.http.port", 2, ErrMissing, "lists no ports"},
		{"http unknown key", "ports: [\"80\"]\nhealthcheck:\n  http: {pth: /}", true, "healthcheck.http.pth", 3, ErrUnknownKey, "did you mean path?"},
		{"tcp unknown key", "ports: [\"80\"]\nhealthcheck:\n  tcp: {path: /}", true, "healthcheck.tcp.path", 3, ErrUnknownKey, "unknown key"},
		{"tcp port string", "ports: [\"80\"]\nhealthcheck:\n  tcp: {port: eighty}", true, "healthcheck.tcp.port", 3, ErrType, "want a port number"},
		{"interval bare number", "healthcheck:\n  test: [CMD, x]\n  interval: 30", true, "healthcheck.interval", 3, ErrType, "want a duration like 30s or 15m, got \"30\""},
		{"interval zero", "healthcheck:\n  test: [CMD, x]\n  interval: 0s", true, "healthcheck.interval", 3, ErrValue, "more than 0s"},
		{"interval negative", "healthcheck:\n  test: [CMD, x]\n  interval: -1s", true, "healthcheck.interval", 3, ErrValue, "0s or more"},
		{"timeout words", "healthcheck:\n  test: [CMD, x]\n  timeout: soon", true, "healthcheck.timeout", 3, ErrType, "want a duration"},
		{"start_interval zero", "healthcheck:\n  test: [CMD, x]\n  start_interval: 0s", true, "healthcheck.start_interval", 3, ErrValue, "more than 0s"},
		{"start_period list", "healthcheck:\n  test: [CMD, x]\n  start_period: [1s]", true, "healthcheck.start_period", 3, ErrType, "got a list"},
		{"retries zero", "healthcheck:\n  test: [CMD, x]\n  retries: 0", true, "healthcheck.retries", 3, ErrValue, "positive integer"},
		{"disable yes", "healthcheck:\n  test: [CMD, x]\n  disable: yes", true, "healthcheck.disable", 3, ErrType, "want true or false"},
		{"healthcheck unknown", "healthcheck:\n  test: [CMD, x]\n  grace: 1s", true, "healthcheck.grace", 3, ErrUnknownKey, "unknown key"},
		// depends_on
		{"depends on nothing", "depends_on: [nope]", true, "depends_on[0]", 1, ErrDependency, `no service "nope"`},
		{"depends on itself", "depends_on: [api]", true, "depends_on[0]", 1, ErrDependency, "itself"},
		{"depends twice", "depends_on: [db, db]", true, "depends_on[1]", 1, ErrDependency, "listed twice"},
		{"depends condition", "depends_on:\n  db: {condition: service_completed_successfully}", true, "depends_on[0]", 2, ErrValue, "condition must be"},
		{"depends healthy without healthcheck", "depends_on:\n  cache: {condition: service_healthy}", true, "depends_on[0]", 2, ErrDependency, "cache has no healthcheck"},
		{"depends unknown key", "depends_on:\n  db: {restarts: true}", true, "depends_on.db.restarts", 2, ErrUnknownKey, "unknown key"},
		{"depends scalar", "depends_on: db", true, "depends_on", 1, ErrType, "want a map"},
		// deploy
		{"replicas words", "deploy:\n  replicas: three", true, "deploy.replicas", 2, ErrType, `want a non-negative integer, got "three"`},
		{"replicas negative", "deploy:\n  replicas: -1", true, "deploy.replicas", 2, ErrValue, "want a non-negative integer, got -1"},
		{"replicas float", "deploy:\n  replicas: 1.5", true, "deploy.replicas", 2, ErrType, "non-negative integer"},
		{"replicas quoted", "deploy:\n  replicas: \"3\"", true, "deploy.replicas", 2, ErrType, "non-negative integer"},
		{"replicas huge", "deploy:\n  replicas: 200000", true, "deploy.replicas", 2, ErrValue, "want 0..100000"},
		{"deploy unknown", "deploy:\n  modus: global", true, "deploy.modus", 2, ErrUnknownKey, "unknown key"},
		{"restart condition", "deploy:\n  restart_policy: {condition: always}", true, "deploy.restart_policy.condition", 2, ErrValue, `want one of none, on-failure, any, got "always"`},
		{"restart max_attempts", "deploy:\n  restart_policy: {max_attempts: -1}", true, "deploy.restart_policy.max_attempts", 2, ErrValue, "non-negative"},
		{"restart window", "deploy:\n  restart_policy: {window: 5}", true, "deploy.restart_policy.window", 2, ErrType, "want a duration"},
		{"restart unknown", "deploy:\n  restart_policy: {delays: 5s}", true, "deploy.restart_policy.delays", 2, ErrUnknownKey, "did you mean delay?"},
		{"update order", "deploy:\n  update_config: {order: random}", true, "deploy.update_config.order", 2, ErrValue, "stop-first, start-first"},
		{"update failure_action", "deploy:\n  update_config: {failure_action: ignore}", true, "deploy.update_config.failure_action", 2, ErrValue, "pause, rollback, continue"},
		{"update parallelism", "deploy:\n  update_config: {parallelism: -2}", true, "deploy.update_config.parallelism", 2, ErrValue, "non-negative"},
		{"update monitor", "deploy:\n  update_config: {monitor: x}", true, "deploy.update_config.monitor", 2, ErrType, "want a duration"},
		{"update unknown", "deploy:\n  update_config: {max_failure: 0.1}", true, "deploy.update_config.max_failure", 2, ErrUnknownKey, "unknown key"},
		{"cpus words", "deploy:\n  resources:\n    limits: {cpus: lots}", true, "deploy.resources.limits.cpus", 3, ErrType, "want a number"},
		{"cpus nan", "deploy:\n  resources:\n    limits: {cpus: \"NaN\"}", true, "deploy.resources.limits.cpus", 3, ErrType, "want a number"},
		{"cpus negative", "deploy:\n  resources:\n    limits: {cpus: -1}", true, "deploy.resources.limits.cpus", 3, ErrValue, "0 or more"},
		{"memory unit", "deploy:\n  resources:\n    limits: {memory: 12zb}", true, "deploy.resources.limits.memory", 3, ErrValue, "want a size like 512m"},
		// DRV-13: the resource keys engenho enforces, and what it refuses.
		{"reservations cpus", "deploy:\n  resources:\n    reservations: {cpus: 1}", true, "deploy.resources.reservations.cpus", 3, ErrUnknownKey, "engenho reserves only memory"},
		{"reservations unknown", "deploy:\n  resources:\n    reservations: {memroy: 1g}", true, "deploy.resources.reservations.memroy", 3, ErrUnknownKey, "did you mean memory?"},
		{"limits unknown", "deploy:\n  resources:\n    limits: {devices: 5}", true, "deploy.resources.limits.devices", 3, ErrUnknownKey, "unknown key"},
		{"limits pids words", "deploy:\n  resources:\n    limits: {pids: many}", true, "deploy.resources.limits.pids", 3, ErrType, "want an integer"},
		{"limits pids negative", "deploy:\n  resources:\n    limits: {pids: -5}", true, "deploy.resources.limits.pids", 3, ErrValue, "-1 for no limit"},
		{"memory too small", "deploy:\n  resources:\n    limits: {memory: 1m}", true, "deploy.resources.limits.memory", 3, ErrValue, "want at least 4m"},
		{"cpus too small", "deploy:\n  resources:\n    limits: {cpus: 0.001}", true, "deploy.resources.limits.cpus", 3, ErrValue, "want at least 0.01 CPUs"},
		{"reservation above limit", "deploy:\n  resources:\n    limits: {memory: 64m}\n    reservations: {memory: 128m}", true, "deploy.resources.reservations.memory", 4, ErrValue, "the reservation 128m is above the memory limit 64m"},
		{"mem_limit differs", "mem_limit: 128m\ndeploy:\n  resources:\n    limits: {memory: 64m}", true, "mem_limit", 1, ErrValue, "mem_limit and deploy.resources.limits.memory are both set, to different values"},
		{"cpus differs", "cpus: 1\ndeploy:\n  resources:\n    limits: {cpus: 0.5}", true, "cpus", 1, ErrValue, "cpus and deploy.resources.limits.cpus are both set"},
		{"pids_limit words", "pids_limit: lots", true, "pids_limit", 1, ErrType, "want an integer"},
		{"mem_reservation unit", "mem_reservation: 3x", true, "mem_reservation", 1, ErrValue, "want a size like 512m"},
		// driver, grace
		{"driver name", "driver: Incus", true, "driver", 1, ErrValue, `invalid driver name "Incus"`},
		{"driver path", "driver: ../x", true, "driver", 1, ErrValue, "invalid driver name"},
		{"stop grace words", "stop_grace_period: soon", true, "stop_grace_period", 1, ErrType, "want a duration"},
		{"stop grace negative", "stop_grace_period: -5s", true, "stop_grace_period", 1, ErrValue, "0s or more"},
		// hibernate
		{"hibernate no host", "ports: [\"80\"]\nhibernate: {idle: 5m}", true, "hibernate.host", 2, ErrMissing, "required"},
		{"hibernate upper-case host", "ports: [\"80\"]\nhibernate: {host: Notes.Example.com}", true, "hibernate.host", 2, ErrValue, "lower-case DNS name"},
		{"hibernate host traversal SEC-3", "ports: [\"80\"]\nhibernate: {host: ../etc}", true, "hibernate.host", 2, ErrValue, "lower-case DNS name"},
		{"hibernate host empty label", "ports: [\"80\"]\nhibernate: {host: a..b}", true, "hibernate.host", 2, ErrValue, "lower-case DNS name"},
		{"hibernate host slash", "ports: [\"80\"]\nhibernate: {host: a/b}", true, "hibernate.host", 2, ErrValue, "lower-case DNS name"},
		{"hibernate idle zero", "ports: [\"80\"]\nhibernate: {host: a.b, idle: 0s}", true, "hibernate.idle", 2, ErrValue, "more than 0s"},
		{"hibernate replication", "ports: [\"80\"]\nhibernate: {host: a.b, replication: hourly}", true, "hibernate.replication", 2, ErrValue, "stream, batched, daily"},
		{"hibernate data_dir", "ports: [\"80\"]\nhibernate: {host: a.b, data_dir: data}", true, "hibernate.data_dir", 2, ErrValue, "clean absolute path"},
		{"hibernate seed empty", "ports: [\"80\"]\nhibernate: {host: a.b, seed: []}", true, "hibernate.seed", 2, ErrValue, "empty command"},
		{"hibernate port", "ports: [\"80\"]\nhibernate: {host: a.b, port: 81}", true, "hibernate.port", 2, ErrValue, "not one of the service's target ports"},
		{"hibernate no ports", "hibernate: {host: a.b}", true, "hibernate.port", 1, ErrMissing, "needs a port for the edge"},
		{"hibernate replicas", "ports: [\"80\"]\nhibernate: {host: a.b}\ndeploy: {replicas: 3}", true, "deploy.replicas", 3, ErrValue, "runs one instance"},
		{"hibernate published", "ports: [\"8080:80\"]\nhibernate: {host: a.b}", true, "ports[0]", 1, ErrValue, "not a published port"},
		{"hibernate and x-engenho.host", "ports: [\"80\"]\nhibernate: {host: a.b}\nx-engenho: {host: c.d}", true, "x-engenho.host", 3, ErrValue, "hibernate.host"},
		{"hibernate unknown", "ports: [\"80\"]\nhibernate: {host: a.b, ttl: 5m}", true, "hibernate.ttl", 2, ErrUnknownKey, "unknown key"},
		{"hibernate list", "hibernate: [a]", true, "hibernate", 1, ErrType, "want a map"},
		// sidecars
		{"sidecar no name", "sidecars:\n  - {command: [x]}", true, "sidecars[0].name", 2, ErrMissing, "required"},
		{"sidecar name digit", "sidecars:\n  - {name: 1x, command: [x]}", true, "sidecars[0].name", 2, ErrValue, "[a-z][a-z0-9-]{0,62}"},
		{"sidecar name twice", "sidecars:\n  - {name: x, command: [x]}\n  - {name: x, command: [x]}", true, "sidecars[1].name", 3, ErrValue, "listed twice"},
		{"sidecar no command", "sidecars:\n  - {name: x}", true, "sidecars[0].command", 2, ErrMissing, "required"},
		{"sidecar unknown", "sidecars:\n  - {name: x, command: [x], restart: always}", true, "sidecars[0].restart", 2, ErrUnknownKey, "unknown key"},
		{"sidecar backoff cap", "sidecars:\n  - name: x\n    command: [x]\n    backoff: {initial: 10s, cap: 1s}", true, "sidecars[0].backoff.cap", 4, ErrValue, "at least backoff.initial"},
		{"sidecar backoff unknown", "sidecars:\n  - name: x\n    command: [x]\n    backoff: {max: 1s}", true, "sidecars[0].backoff.max", 4, ErrUnknownKey, "unknown key"},
		{"sidecar always_on words", "sidecars:\n  - {name: x, command: [x], always_on: sure}", true, "sidecars[0].always_on", 2, ErrType, "want true or false"},
		{"sidecars map", "sidecars: {x: y}", true, "sidecars", 1, ErrType, "want a list"},
		{"sidecar env reserved", "sidecars:\n  - {name: x, command: [x], env: {ENGENHO_STACK: s}}", true, "sidecars[0].env.ENGENHO_STACK", 2, ErrValue, "set by engenho"},
		{"standalone with ports", "ports: [\"80\"]\nsidecars:\n  - {name: x, command: [x]}", false, "ports", 1, ErrValue, "standalone worker"},
		{"standalone with replicas", "deploy: {replicas: 2}\nsidecars:\n  - {name: x, command: [x]}", false, "deploy.replicas", 1, ErrValue, "standalone worker runs once"},
		// x-engenho
		{"x-engenho unknown", "x-engenho:\n  stable_window: 5m", true, "x-engenho.stable_window", 2, ErrUnknownKey, "unknown key"},
		{"x-engenho jitter", "x-engenho:\n  backoff: {jitter: 2}", true, "x-engenho.backoff.jitter", 2, ErrValue, "fraction from 0 to 1"},
		{"x-engenho jitter bool", "x-engenho:\n  backoff: {jitter: true}", true, "x-engenho.backoff.jitter", 2, ErrType, "want a number"},
		{"x-engenho delay zero", "x-engenho:\n  backoff: {delays: [1m, 0s]}", true, "x-engenho.backoff.delays[1]", 2, ErrValue, "more than 0s"},
		{"x-engenho delay bad", "x-engenho:\n  backoff: {delays: [1m, x]}", true, "x-engenho.backoff.delays[1]", 2, ErrType, "want a duration"},
		{"x-engenho cap zero", "x-engenho:\n  backoff: {cap: 0s}", true, "x-engenho.backoff.cap", 2, ErrValue, "more than 0s"},
		{"x-engenho immediate negative", "x-engenho:\n  backoff: {immediate: -1}", true, "x-engenho.backoff.immediate", 2, ErrValue, "non-negative"},
		{"x-engenho stable zero", "x-engenho:\n  stable: 0s", true, "x-engenho.stable", 2, ErrValue, "more than 0s"},
		{"x-engenho step_timeout zero", "x-engenho:\n  step_timeout: 0s", true, "x-engenho.step_timeout", 2, ErrValue, "more than 0s"},
		{"x-engenho threshold zero", "x-engenho:\n  unhealthy_threshold: 0", true, "x-engenho.unhealthy_threshold", 2, ErrValue, "positive"},
		{"x-engenho replace zero", "x-engenho:\n  restarts_before_replace: 0", true, "x-engenho.restarts_before_replace", 2, ErrValue, "positive"},
		{"x-engenho drain negative", "x-engenho:\n  drain: -1s", true, "x-engenho.drain", 2, ErrValue, "0s or more"},
		{"x-engenho host", "x-engenho:\n  host: Bad_Host", true, "x-engenho.host", 2, ErrValue, "lower-case DNS name"},
		{"x-engenho secret_env scalar", "x-engenho:\n  secret_env: A", true, "x-engenho.secret_env", 2, ErrType, "want a list"},
		// YAML features
		{"custom tag", "stop_grace_period: !reset 5s", true, "stop_grace_period", 1, ErrValue, "YAML tag !reset is not supported"},
		{"merge of a list of scalars", "<<: [a]", true, "", 1, ErrType, "a merge key (<<) takes a map"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := stackYAML(tc.body, tc.cmd) + others
			ps := parseProblems(t, "t.yaml", src)
			if len(ps) != 1 {
				t.Fatalf("want exactly one problem, got %d:\n%s", len(ps), (&ParseError{Problems: ps}).Error())
			}
			p := ps[0]
			wantKey := "services.api"
			if tc.key != "" {
				wantKey += "." + tc.key
			}
			wantLine := 3 // the service's own line
			if tc.line > 0 {
				wantLine = tc.line + bodyOffset(tc.cmd)
			}
			if p.File != "t.yaml" || p.Key != wantKey || p.Line != wantLine || p.Column < 1 {
				t.Errorf("at %s:%d:%d key %q, want t.yaml:%d key %q", p.File, p.Line, p.Column, p.Key, wantLine, wantKey)
			}
			if !errors.Is(p.Err, tc.kind) {
				t.Errorf("kind %v, want %v", p.Err, tc.kind)
			}
			if !strings.Contains(p.Msg, tc.msg) {
				t.Errorf("message %q does not say %q", p.Msg, tc.msg)
			}
		})
	}
}

// SVC-1: the exact shape of messages: FILE:LINE: KEY: MESSAGE, every
// problem of a file at once, in file order.
func TestParseErrorShapeSVC1(t *testing.T) {
	src := `services:
  api:
    command: run
    deploy:
      replicas: three
    foo: 1
  web:
    image: [x]
    ports: ["8080:80/udp"]
`
	_, err := Parse("web.yaml", []byte(src))
	want := `web.yaml:5: services.api.deploy.replicas: want a non-negative integer, got "three"
web.yaml:6: services.api.foo: unknown key
web.yaml:8: services.web.image: want a string, got a list
web.yaml:9: services.web.ports[0]: TCP only: engenho's balancer, probes and edge carry TCP, not "udp"`
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
	var pe *ParseError
	if !errors.As(err, &pe) || len(pe.Problems) != 4 {
		t.Fatalf("want a *ParseError with 4 problems, got %T", err)
	}
	if !errors.Is(err, ErrUnknownKey) || !errors.Is(err, ErrType) || errors.Is(err, ErrDependency) {
		t.Fatal("errors.Is must find exactly the kinds present")
	}
}

// SVC-1: problems that concern the whole file or several services.
func TestParseFileLevelErrorsSVC1(t *testing.T) {
	cases := []struct {
		name string
		src  string
		key  string
		line int
		kind error
		msg  string
	}{
		{"empty file", "", "", 1, ErrMissing, "file is empty"},
		{"only a comment", "# nothing\n", "", 1, ErrMissing, "file is empty"},
		{"not YAML", "services: [\n", "", 1, ErrSyntax, "not valid YAML"},
		{"bad indentation", "services:\n  a:\n    command: x\n   b: y\n", "", 0, ErrSyntax, "not valid YAML"},
		{"two documents", "services: {a: {command: x}}\n---\nservices: {}\n", "", 2, ErrSyntax, "one YAML document"},
		{"top level list", "- a\n", "", 1, ErrType, "want a map"},
		{"no services", "name: x\n", "services", 1, ErrMissing, "at least one service"},
		{"services empty", "services: {}\n", "services", 1, ErrMissing, "at least one service"},
		{"services list", "services: [a]\n", "services", 1, ErrType, "want a map"},
		{"top unknown", "services: {a: {command: x}}\nvolume: {}\n", "volume", 2, ErrUnknownKey, "unknown key"},
		{"top unknown suggestion", "services: {a: {command: x}}\nservice: {}\n", "service", 2, ErrUnknownKey, "did you mean services?"},
		{"bad service name", "services:\n  My_App: {command: x}\n", "services.My_App", 2, ErrValue, "invalid service name"},
		{"service name too long", "services:\n  " + strings.Repeat("a", 64) + ": {command: x}\n", "services." + strings.Repeat("a", 64), 2, ErrValue, "invalid service name"},
		{"service twice", "services:\n  a: {command: x}\n  a: {command: y}\n", "services.a", 3, ErrValue, "key given twice"},
		{"name not a string", "name: [x]\nservices: {a: {command: x}}\n", "name", 1, ErrType, "want a string"},
		{"name invalid", "name: Shop\nservices: {a: {command: x}}\n", "name", 1, ErrValue, `invalid stack name "Shop"`},
		{"key not a word", "services: {a: {command: x}}\n? [a]\n: b\n", "", 2, ErrType, "a key must be a plain word"},
		{"published twice in stack", "services:\n  a: {command: x, ports: [\"80:1\"]}\n  b: {command: x, ports: [\"80:2\"]}\n",
			"services.b.ports[0]", 3, ErrValue, "port 80 is also published by service a"},
		{"host twice in stack", "services:\n  a: {command: x, x-engenho: {host: h.x}}\n  b: {command: x, x-engenho: {host: h.x}}\n",
			"services.b.x-engenho.host", 3, ErrValue, "host h.x is also used by service a"},
		{"cycle", "services:\n  a: {command: x, depends_on: [b]}\n  b: {command: x, depends_on: [c]}\n  c: {command: x, depends_on: [a]}\n",
			"services.a.depends_on", 2, ErrDependency, "dependency cycle: a → b → c → a"},
		{"self merge", "services:\n  a: &a\n    command: x\n    <<: *a\n", "services.a", 2, ErrSyntax, "refers to the map it is in"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := parseProblems(t, "s.yaml", tc.src)
			var found *Problem
			for i := range ps {
				if ps[i].Key == tc.key && errors.Is(ps[i].Err, tc.kind) && strings.Contains(ps[i].Msg, tc.msg) {
					found = &ps[i]
				}
			}
			if found == nil {
				t.Fatalf("no %v problem at %q saying %q in:\n%s", tc.kind, tc.key, tc.msg, (&ParseError{Problems: ps}).Error())
			}
			if found.File != "s.yaml" || found.Line < 1 || (tc.line > 0 && found.Line != tc.line) {
				t.Errorf("located at %s:%d, want s.yaml:%d", found.File, found.Line, tc.line)
			}
		})
	}
}

// REL-2: a file whose merge keys expand into a hundred million keys stops
// early with a located problem instead of spinning.
func TestParseMergeBombREL2(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-0: &a0 {k: v}\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "x-%d: &a%d\n  <<: [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("services:\n  api:\n    command: x\n    <<: *a8\n")
	ps := parseProblems(t, "bomb.yaml", b.String())
	tooComplex := false
	for _, p := range ps {
		if p.Line < 1 || p.File != "bomb.yaml" {
			t.Fatalf("problem without a location: %+v", p)
		}
		tooComplex = tooComplex || errors.Is(p.Err, ErrSyntax) && strings.Contains(p.Msg, "too complex")
	}
	if !tooComplex {
		t.Fatalf("no 'too complex' problem:\n%s", (&ParseError{Problems: ps}).Error())
	}
}

// A refused file still names its stack, as Parse settled it (for the
// deploy audit of the refusal): the top-level name, else the file name's,
// and "" when neither is a valid stack name.
func TestParseErrorStackName(t *testing.T) {
	for _, c := range []struct{ file, src, want string }{
		{"web.yaml", "name: shop\nservices:\n  a: {bogus: 1}\n", "shop"},
		{"web.yaml", "services:\n  a: {bogus: 1}\n", "web"},
		{"web.yaml", "services: [: not yaml\n", "web"},
		{"Web_Stack.yaml", "services:\n  a: {bogus: 1}\n", ""},
	} {
		_, err := Parse(c.file, []byte(c.src))
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: want a ParseError, got %v", c.src, err)
		}
		if got := pe.StackName(); got != c.want {
			t.Errorf("%s %q: StackName %q, want %q", c.file, c.src, got, c.want)
		}
	}
}
