package stackfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// parseAll parses src with opts and returns the stack (nil when refused),
// its problems and its warnings.
func parseAll(t *testing.T, src string, opts Options) (*Stack, []Problem, []Problem) {
	t.Helper()
	st, err := ParseWith("t.yaml", []byte(src), opts)
	if err == nil {
		return st, nil, st.Warnings
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error is %T, want *ParseError: %v", err, err)
	}
	return nil, pe.Problems, pe.Warnings
}

func problemLines(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}

// wantProblem is one expected problem or warning: key under services.api
// (or the full key when it starts with "services." or is top-level and
// top is set), body line, kind, and a part of the message.
type wantProblem struct {
	key  string
	line int
	kind error
	msg  string
}

func checkProblems(t *testing.T, got []Problem, want []wantProblem, offset int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d, want %d:\n%s", len(got), len(want), problemLines(got))
	}
	for i, w := range want {
		p := got[i]
		key := w.key
		if !strings.HasPrefix(key, "services.") && !strings.HasPrefix(key, "/") {
			key = "services.api." + key
		}
		key = strings.TrimPrefix(key, "/")
		if p.Key != key || p.Line != w.line+offset || !errors.Is(p.Err, w.kind) || !strings.Contains(p.Msg, w.msg) {
			t.Errorf("[%d] got %s (%v), want %s at body line %d (%v) saying %q", i, p, p.Err, key, w.line, w.kind, w.msg)
		}
	}
}

// SVC-1, SUP-16: Compose's restart is the condition (and for on-failure:N
// the attempt cap) of deploy.restart_policy; with neither, engenho keeps
// its supervisor default, any.
func TestComposeRestartSUP16(t *testing.T) {
	cases := []struct {
		name string
		body string
		want RestartPolicy
	}{
		{"neither: engenho's default", "", RestartPolicy{Condition: RestartAny}},
		{"no: never restart", `restart: "no"`, RestartPolicy{Condition: RestartNone}},
		{"no unquoted", "restart: no", RestartPolicy{Condition: RestartNone}},
		{"always", "restart: always", RestartPolicy{Condition: RestartAny}},
		{"unless-stopped: as always on a supervisor", "restart: unless-stopped", RestartPolicy{Condition: RestartAny}},
		{"on-failure", "restart: on-failure", RestartPolicy{Condition: RestartOnFailure}},
		{"on-failure:N caps attempts", "restart: on-failure:5", RestartPolicy{Condition: RestartOnFailure, MaxAttempts: 5}},
		{"restart with the other policy keys", "restart: on-failure\ndeploy:\n  restart_policy: {max_attempts: 3, window: 2m, delay: 5s}",
			RestartPolicy{Condition: RestartOnFailure, MaxAttempts: 3, Window: 2 * time.Minute, Delay: 5 * time.Second}},
		{"both agree", "restart: always\ndeploy:\n  restart_policy: {condition: any}", RestartPolicy{Condition: RestartAny}},
		{"both agree with N", "restart: on-failure:2\ndeploy:\n  restart_policy: {condition: on-failure, max_attempts: 2}",
			RestartPolicy{Condition: RestartOnFailure, MaxAttempts: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := mustParse(t, "t.yaml", stackYAML(tc.body, true))
			if got := st.Services["api"].Deploy.RestartPolicy; got != tc.want {
				t.Errorf("restart policy %+v, want %+v", got, tc.want)
			}
		})
	}

	bad := []struct {
		name string
		body string
		want []wantProblem
	}{
		{"unknown value", "restart: sometimes", []wantProblem{{"restart", 1, ErrValue, "want no, always, on-failure, on-failure:N or unless-stopped"}}},
		{"bad N", "restart: on-failure:x", []wantProblem{{"restart", 1, ErrValue, "on-failure:N"}}},
		{"negative N", "restart: on-failure:-1", []wantProblem{{"restart", 1, ErrValue, "on-failure:N"}}},
		{"disagree: both lines", "restart: always\ndeploy:\n  restart_policy:\n    condition: none", []wantProblem{
			{"restart", 1, ErrValue, "line 8 gives none"},
			{"deploy.restart_policy.condition", 4, ErrValue, "disagrees with restart at line 5"},
		}},
		{"disagree on N", "deploy:\n  restart_policy: {condition: on-failure, max_attempts: 3}\nrestart: on-failure:5", []wantProblem{
			{"deploy.restart_policy.max_attempts", 2, ErrValue, "disagrees with restart at line 7"},
			{"restart", 3, ErrValue, "max_attempts: 5, but line 6 gives 3"},
		}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps, _ := parseAll(t, stackYAML(tc.body, true), Options{})
			checkProblems(t, ps, tc.want, bodyOffset(true))
		})
	}
}

// SVC-1: entrypoint and command combine as Compose does: the entrypoint
// is the program, the command its arguments; an empty entrypoint clears
// it and the command runs by itself.
func TestComposeEntrypointSVC1(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		command []string
		args    []string
	}{
		{"command only", "command: run -v", []string{"run", "-v"}, nil},
		{"entrypoint string, command list", "entrypoint: /bin/tini --\ncommand: [server, --port, '80']", []string{"/bin/tini", "--"}, []string{"server", "--port", "80"}},
		{"entrypoint list, command string", "entrypoint: [sh, -c]\ncommand: 'echo hi'", []string{"sh", "-c"}, []string{"echo", "hi"}},
		{"command before entrypoint", "command: serve\nentrypoint: [app]", []string{"app"}, []string{"serve"}},
		{"entrypoint without command", "entrypoint: [app, serve]", []string{"app", "serve"}, nil},
		{"entrypoint, command and args", "entrypoint: app\ncommand: serve\nargs: [--debug]", []string{"app"}, []string{"serve", "--debug"}},
		{"empty entrypoint string: the command alone", "entrypoint: ''\ncommand: [run, x]", []string{"run", "x"}, nil},
		{"empty entrypoint list: the command alone", "entrypoint: []\ncommand: run", []string{"run"}, nil},
		{"empty entrypoint, an image, no command: the image's own", "image: busybox\nentrypoint: []", nil, nil},
		{"entrypoint with an empty command list", "entrypoint: [app]\ncommand: []", []string{"app"}, nil},
		{"entrypoint with an empty command string", "command: ''\nentrypoint: app -v", []string{"app", "-v"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := mustParse(t, "t.yaml", stackYAML(tc.body, false))
			svc := st.Services["api"]
			if !reflect.DeepEqual(svc.Command, tc.command) || !reflect.DeepEqual(svc.Args, tc.args) {
				t.Errorf("command %q args %q, want %q %q", svc.Command, svc.Args, tc.command, tc.args)
			}
		})
	}
	bad := []struct {
		name string
		body string
		want wantProblem
	}{
		{"a map", "entrypoint: {a: b}", wantProblem{"entrypoint", 1, ErrType, "want a string or a list"}},
		{"empty program", "entrypoint: ['', x]", wantProblem{"entrypoint", 1, ErrValue, "program (first word) is empty"}},
		{"unclosed quote", "entrypoint: \"sh -c 'x\"", wantProblem{"entrypoint", 1, ErrValue, ""}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps, _ := parseAll(t, stackYAML(tc.body, true), Options{})
			checkProblems(t, ps, []wantProblem{tc.want}, bodyOffset(true))
		})
	}
}

// SVC-1: expose lists ports that are not published; engenho records them
// (on the node's network they are reachable from the node already) and
// gives no warning for a key it honours.
func TestComposeExposeSVC1(t *testing.T) {
	st, _, warns := parseAll(t, stackYAML(`expose: ["80", 8080, "8000-8010", "9000/tcp"]`, true), Options{})
	if st == nil {
		t.Fatal("refused")
	}
	if got, want := st.Services["api"].Expose, []string{"80", "8080", "8000-8010", "9000"}; !reflect.DeepEqual(got, want) {
		t.Errorf("expose %q, want %q", got, want)
	}
	if len(warns) != 0 {
		t.Errorf("warnings for an honoured key:\n%s", problemLines(warns))
	}
	if len(st.Services["api"].Ports) != 0 {
		t.Error("expose published a port")
	}
	bad := []struct {
		name string
		body string
		want wantProblem
	}{
		{"udp", `expose: ["53/udp"]`, wantProblem{"expose[0]", 1, ErrUnsupported, "TCP only"}},
		{"not a port", `expose: ["http"]`, wantProblem{"expose[0]", 1, ErrValue, "want a port or a range"}},
		{"backwards range", `expose: ["90-80"]`, wantProblem{"expose[0]", 1, ErrValue, "ends before it starts"}},
		{"out of range", `expose: [70000]`, wantProblem{"expose[0]", 1, ErrValue, "outside 1..65535"}},
		{"a string", `expose: "80"`, wantProblem{"expose", 1, ErrType, "want a list"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps, _ := parseAll(t, stackYAML(tc.body, true), Options{})
			checkProblems(t, ps, []wantProblem{tc.want}, bodyOffset(true))
		})
	}
}

// SVC-3: labels (map or list) are stored on every instance beside
// engenho's own labels, which win; a user label may not use the engenho.
// prefix.
func TestComposeLabelsSVC3(t *testing.T) {
	want := map[string]string{"com.example.tier": "front", "empty": "", "traefik.enable": "true"}
	for _, body := range []string{
		"labels:\n  com.example.tier: front\n  empty:\n  traefik.enable: true",
		`labels: ["com.example.tier=front", "empty", "traefik.enable=true"]`,
	} {
		st := mustParse(t, "t.yaml", stackYAML(body, true))
		svc := st.Services["api"]
		if !reflect.DeepEqual(svc.Labels, want) {
			t.Fatalf("%s: labels %v, want %v", body, svc.Labels, want)
		}
		spec := InstanceSpec(svc, Instance{Stack: "t", Slot: 1, ID: "a1"})
		for k, v := range want {
			if spec.Labels[k] != v {
				t.Errorf("instance label %s = %q, want %q", k, spec.Labels[k], v)
			}
		}
		if spec.Labels["engenho.stack"] != "t" || spec.Labels["engenho.service"] != "api" {
			t.Errorf("engenho's labels lost: %v", spec.Labels)
		}
		sc := SidecarSpec(svc, Sidecar{Name: "log", Command: []string{"x"}}, Instance{Stack: "t", Slot: 1, ID: "b2"})
		if sc.Labels["com.example.tier"] != "front" || sc.Labels[LabelSidecar] != "log" {
			t.Errorf("sidecar labels %v", sc.Labels)
		}
	}
	// Labels are on the instance: a change is a new revision.
	a := mustParse(t, "t.yaml", stackYAML("labels: {a: x}", true)).Services["api"]
	b := mustParse(t, "t.yaml", stackYAML("labels: {a: y}", true)).Services["api"]
	if a.Revision() == b.Revision() {
		t.Error("a label change kept the revision")
	}
	if c := mustParse(t, "t.yaml", stackYAML("", true)).Services["api"]; c.Revision() != apiRun().Revision() {
		t.Error("no labels changed the revision of a service without them")
	}

	// engenho's own labels win even over a stack built in code.
	svc := apiRun()
	svc.Labels = map[string]string{"engenho.stack": "other"}
	if err := (&Stack{Name: "t", Order: []string{"api"}, Services: map[string]Service{"api": svc}}).Check(); err == nil {
		t.Error("Check accepted a user label with the engenho. prefix")
	}
	if got := InstanceSpec(svc, Instance{Stack: "t", Slot: 1, ID: "a1"}).Labels["engenho.stack"]; got != "t" {
		t.Errorf("engenho.stack = %q: a user label won", got)
	}

	bad := []struct {
		name string
		body string
		want wantProblem
	}{
		{"engenho prefix", "labels: {engenho.stack: x}", wantProblem{"labels.engenho.stack", 1, ErrValue, "engenho's own"}},
		{"engenho prefix in a list", `labels: ["engenho.slot=1"]`, wantProblem{"labels[0]", 1, ErrValue, "engenho's own"}},
		{"bad key", `labels: ["bad key=1"]`, wantProblem{"labels[0]", 1, ErrValue, "invalid label key"}},
		{"twice", `labels: ["a=1", "a=2"]`, wantProblem{"labels[1]", 1, ErrValue, "given twice"}},
		{"a list value", "labels: {a: [1]}", wantProblem{"labels.a", 1, ErrType, "want a string"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps, _ := parseAll(t, stackYAML(tc.body, true), Options{})
			checkProblems(t, ps, []wantProblem{tc.want}, bodyOffset(true))
		})
	}
}

// SVC-3: container_name names the one instance; the instance name stays
// STACK-SERVICE-SLOT-ID and the name is the label engenho.container_name.
func TestComposeContainerNameSVC3(t *testing.T) {
	st := mustParse(t, "t.yaml", stackYAML("container_name: my-api", true))
	svc := st.Services["api"]
	spec := InstanceSpec(svc, Instance{Stack: "t", Slot: 1, ID: "a1"})
	if spec.Name != "t-api-1-a1" || spec.Labels[LabelContainerName] != "my-api" {
		t.Errorf("instance %s labels %v", spec.Name, spec.Labels)
	}
	mustParse(t, "t.yaml", stackYAML("container_name: one\ndeploy: {replicas: 1}", true))

	bad := []struct {
		name string
		body string
		want []wantProblem
	}{
		{"replicas > 1: both lines", "container_name: one\ndeploy:\n  replicas: 3", []wantProblem{
			{"container_name", 1, ErrValue, "replicas is 3"},
			{"deploy.replicas", 3, ErrValue, "container_name at line 5"},
		}},
		{"scale > 1: both lines", "scale: 2\ncontainer_name: one", []wantProblem{
			{"scale", 1, ErrValue, "container_name at line 6"},
			{"container_name", 2, ErrValue, "replicas is 2"},
		}},
		{"bad name", "container_name: -x", []wantProblem{{"container_name", 1, ErrValue, "want [a-zA-Z0-9]"}}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps, _ := parseAll(t, stackYAML(tc.body, true), Options{})
			checkProblems(t, ps, tc.want, bodyOffset(true))
		})
	}
	src := "name: t\nservices:\n  a:\n    command: x\n    container_name: same\n  b:\n    command: y\n    container_name: same\n"
	_, ps, _ := parseAll(t, src, Options{})
	checkProblems(t, ps, []wantProblem{{"services.b.container_name", 8, ErrValue, "also used by service a"}}, 0)
}

// SVC-1: scale is deploy.replicas; both disagreeing is an error.
func TestComposeScaleSVC1(t *testing.T) {
	if n := mustParse(t, "t.yaml", stackYAML("scale: 3", true)).Services["api"].Deploy.Replicas; n != 3 {
		t.Errorf("replicas %d, want 3", n)
	}
	if n := mustParse(t, "t.yaml", stackYAML("scale: 2\ndeploy: {replicas: 2}", true)).Services["api"].Deploy.Replicas; n != 2 {
		t.Errorf("replicas %d, want 2", n)
	}
	_, ps, _ := parseAll(t, stackYAML("scale: 2\ndeploy: {replicas: 3}", true), Options{})
	checkProblems(t, ps, []wantProblem{{"scale", 1, ErrValue, "disagrees with deploy.replicas: 3 at line 6"}}, bodyOffset(true))
	if n := mustParse(t, "t.yaml", stackYAML("deploy: {mode: global}", true)).Services["api"].Deploy.Replicas; n != 1 {
		t.Errorf("global: replicas %d, want 1 (one node)", n)
	}
}

// SVC-1: a service with profiles is in the stack only when one of its
// profiles is active; one without is always in. A dependency on a
// service left out is an error naming it, unless required: false.
func TestComposeProfilesSVC1(t *testing.T) {
	src := `name: t
services:
  web:
    command: web
  debug:
    command: dbg
    profiles: [debug]
  tools:
    command: tools
    profiles: [tools, ops]
`
	cases := []struct {
		active []string
		want   []string
	}{
		{nil, []string{"web"}},
		{[]string{"debug"}, []string{"web", "debug"}},
		{[]string{"ops"}, []string{"web", "tools"}},
		{[]string{"tools", "debug"}, []string{"web", "debug", "tools"}},
		{[]string{"*"}, []string{"web", "debug", "tools"}},
		{[]string{"other"}, []string{"web"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.active), func(t *testing.T) {
			st, ps, _ := parseAll(t, src, Options{Profiles: tc.active})
			if st == nil {
				t.Fatalf("refused:\n%s", problemLines(ps))
			}
			if !reflect.DeepEqual(st.Order, tc.want) || len(st.Services) != len(tc.want) {
				t.Errorf("services %v, want %v", st.Order, tc.want)
			}
		})
	}

	dep := `name: t
services:
  web:
    command: web
    depends_on:
      db:
        condition: service_started
      mock:
        required: false
  db:
    command: db
    profiles: [db]
  mock:
    command: mock
    profiles: [dev]
`
	_, ps, _ := parseAll(t, dep, Options{})
	checkProblems(t, ps, []wantProblem{{"services.web.depends_on[0]", 6, ErrDependency, "db is not enabled: its profiles are db"}}, 0)
	st, ps, warns := parseAll(t, dep, Options{Profiles: []string{"db"}})
	if st == nil {
		t.Fatalf("refused:\n%s", problemLines(ps))
	}
	if got := st.Services["web"].DependsOn; len(got) != 1 || got[0].Service != "db" {
		t.Errorf("depends_on %+v, want db only", got)
	}
	checkProblems(t, warns, []wantProblem{{"services.web.depends_on[1]", 8, ErrWarning, "required: false"}}, 0)
	if st, ps, _ := parseAll(t, dep, Options{Profiles: []string{"db", "dev"}}); st == nil || len(st.Services["web"].DependsOn) != 2 {
		t.Errorf("with both profiles: %v\n%s", st, problemLines(ps))
	}

	_, ps, _ = parseAll(t, "name: t\nservices:\n  a:\n    command: x\n    profiles: [p]\n", Options{})
	checkProblems(t, ps, []wantProblem{{"/services", 3, ErrMissing, "no service is enabled"}}, 0)
	_, ps, _ = parseAll(t, stackYAML("profiles: [\"bad name\"]", true), Options{})
	checkProblems(t, ps, []wantProblem{{"profiles[0]", 1, ErrValue, "invalid profile name"}}, bodyOffset(true))
}

// SVC-7: healthcheck.disable: true and test: ["NONE"] (or "NONE") mean no
// probe, whatever else the healthcheck holds, as in Compose.
func TestComposeHealthcheckDisableSVC7(t *testing.T) {
	for _, body := range []string{
		"healthcheck: {disable: true}",
		"healthcheck: {test: [CMD, x], disable: true}",
		"healthcheck: {test: [NONE]}",
		"healthcheck: {test: NONE, interval: 5s}",
		"healthcheck:\n  disable: true\n  x-engenho: {http: {path: /}}",
	} {
		st := mustParse(t, "t.yaml", stackYAML("ports: [\"80\"]\n"+body, true))
		if hc := st.Services["api"].Healthcheck; hc.Enabled() || hc.Kind != ProbeNone {
			t.Errorf("%s: probe %+v, want none", body, hc)
		}
	}
	if hc := mustParse(t, "t.yaml", stackYAML("healthcheck: {test: [CMD, x], disable: false}", true)).Services["api"].Healthcheck; hc.Kind != ProbeExec {
		t.Errorf("disable: false turned the probe off: %+v", hc)
	}
}

// SVC-18: depends_on's long form takes condition, restart and required.
func TestComposeDependsOnLongSVC18(t *testing.T) {
	src := `name: t
services:
  web:
    command: web
    depends_on:
      db: {condition: service_healthy, restart: true}
      cache: {required: false}
      queue: {required: true, restart: false}
      gone: {required: false}
  db:
    command: db
    healthcheck: {test: [CMD, x]}
  cache:
    command: c
  queue:
    command: q
`
	st, ps, warns := parseAll(t, src, Options{})
	if st == nil {
		t.Fatalf("refused:\n%s", problemLines(ps))
	}
	want := []Dependency{
		{Service: "db", Condition: ConditionHealthy, Restart: true},
		{Service: "cache", Condition: ConditionStarted, Optional: true},
		{Service: "queue", Condition: ConditionStarted},
	}
	if got := st.Services["web"].DependsOn; !reflect.DeepEqual(got, want) {
		t.Errorf("depends_on %+v, want %+v", got, want)
	}
	checkProblems(t, warns, []wantProblem{{"services.web.depends_on[3]", 9, ErrWarning, `no service "gone"`}}, 0)

	_, ps, _ = parseAll(t, stackYAML("depends_on:\n  db: {restart: yes}", true)+"  db:\n    command: db\n", Options{})
	checkProblems(t, ps, []wantProblem{{"depends_on.db.restart", 2, ErrType, "true or false"}}, bodyOffset(true))
	_, ps, _ = parseAll(t, stackYAML("depends_on:\n  nope: {required: true}", true), Options{})
	checkProblems(t, ps, []wantProblem{{"depends_on[0]", 2, ErrDependency, `no service "nope"`}}, bodyOffset(true))
}

// SVC-1, SVC-3, SEC-3: service names may hold "_" as in Compose; instance
// names write it "-", so two services that would meet are refused; a
// service name still holds no dot, slash or upper case.
func TestComposeServiceNamesSVC3(t *testing.T) {
	st := mustParse(t, "t.yaml", "name: t\nservices:\n  my_api:\n    command: x\n")
	svc := st.Services["my_api"]
	spec := InstanceSpec(svc, Instance{Stack: "t", Slot: 2, ID: "ab"})
	if spec.Name != "t-my-api-2-ab" || spec.Labels["engenho.service"] != "my_api" {
		t.Errorf("instance %s service label %q", spec.Name, spec.Labels["engenho.service"])
	}
	if n := SidecarName("t", "my_api", 1, "log", "cd"); n != "t-my-api-1-log-cd" {
		t.Errorf("sidecar name %s", n)
	}
	_, ps, _ := parseAll(t, "name: t\nservices:\n  my_api:\n    command: x\n  my-api:\n    command: y\n", Options{})
	checkProblems(t, ps, []wantProblem{{"services.my-api", 5, ErrValue, `"my-api" and service "my_api"`}}, 0)

	for _, name := range []string{"My_api", "a.b", "..", "_a", "a/b", "a b", strings.Repeat("a", 64)} {
		if ValidServiceName(name) {
			t.Errorf("ValidServiceName(%q) = true", name)
		}
	}
	for _, name := range []string{"a_b", "a-b_c", "0_", "db"} {
		if !ValidServiceName(name) {
			t.Errorf("ValidServiceName(%q) = false", name)
		}
	}
	if ValidName("a_b") {
		t.Error(`ValidName (stacks, drivers) took "_"`)
	}
	_, ps, _ = parseAll(t, "name: t\nservices:\n  Web_1:\n    command: x\n", Options{})
	checkProblems(t, ps, []wantProblem{{"services.Web_1", 3, ErrValue, `starts with 'W' (want [a-z0-9][a-z0-9_-]{0,62}`}}, 0)
}

// SVC-1: engenho's own service keys (driver, hibernate, sidecars) may sit
// under x-engenho, and http/tcp probes under healthcheck.x-engenho, so an
// engenho stack file is a valid Compose file. Both places is an error.
func TestComposeXEngenhoSVC1(t *testing.T) {
	src := `name: t
x-shared: &shared
  stop_grace_period: 3s
services:
  api:
    <<: *shared
    command: run
    ports: ["8080:80"]
    healthcheck:
      interval: 5s
      x-engenho:
        http: {path: /healthz}
    x-other: ignored
    x-engenho:
      driver: incus
      drain: 1s
      sidecars:
        - {name: log, command: [tail]}
  notes:
    command: notes
    ports: ["80"]
    x-engenho:
      hibernate: {host: notes.example.com}
`
	st := mustParse(t, "t.yaml", src)
	api, notes := st.Services["api"], st.Services["notes"]
	if api.Driver != "incus" || len(api.Sidecars) != 1 || api.Engenho.Drain != time.Second || api.StopGracePeriod != 3*time.Second {
		t.Errorf("api: %+v", api)
	}
	if hc := api.Healthcheck; hc.Kind != ProbeHTTP || hc.Path != "/healthz" || hc.Port != 80 || hc.Interval != 5*time.Second {
		t.Errorf("probe %+v", hc)
	}
	if notes.Hibernate == nil || notes.Hibernate.Host != "notes.example.com" || notes.StopGracePeriod != DefaultHibernatedGrace {
		t.Errorf("notes: %+v", notes)
	}

	bad := []struct {
		name string
		body string
		want []wantProblem
	}{
		{"driver twice", "driver: process\nx-engenho:\n  driver: incus", []wantProblem{{"x-engenho.driver", 3, ErrValue, "at line 5 and under x-engenho at line 7"}}},
		{"sidecars twice", "x-engenho:\n  sidecars: [{name: a, command: [a]}]\nsidecars: [{name: b, command: [b]}]", []wantProblem{{"x-engenho.sidecars", 2, ErrValue, "at line 7 and under x-engenho at line 6"}}},
		{"two probes", "ports: [\"80\"]\nhealthcheck:\n  test: [CMD, x]\n  x-engenho: {tcp: {}}", []wantProblem{{"healthcheck", 3, ErrValue, "give one probe"}}},
		{"unknown under x-engenho", "x-engenho:\n  drivr: incus", []wantProblem{{"x-engenho.drivr", 2, ErrUnknownKey, "did you mean driver?"}}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps, _ := parseAll(t, stackYAML(tc.body, true), Options{})
			checkProblems(t, ps, tc.want, bodyOffset(true))
		})
	}
}

// SVC-1: what engenho cannot run is one clear line per key: an error for
// what it cannot honour, a warning for what it can safely ignore; a key
// that is no Compose key stays an unknown key.
func TestComposeUnsupportedKeysSVC1(t *testing.T) {
	cases := []struct {
		name string
		body string
		want wantProblem
		warn bool
	}{
		{"build", "build: .", wantProblem{"build", 1, ErrUnsupported, "build the image first, then reference it with image:"}, false},
		{"build map", "build:\n  context: .\n  dockerfile: Dockerfile", wantProblem{"build", 1, ErrUnsupported, "build the image first"}, false},
		{"udp short", `ports: ["53:53/udp"]`, wantProblem{"ports[0]", 1, ErrUnsupported, "TCP only"}, false},
		{"udp long", "ports:\n  - target: 53\n    protocol: udp", wantProblem{"ports[0].protocol", 3, ErrUnsupported, "TCP only"}, false},
		{"privileged", "privileged: true", wantProblem{"privileged", 1, ErrUnsupported, "never runs an instance privileged"}, false},
		{"cap_drop", "cap_drop: [ALL]", wantProblem{"cap_drop", 1, ErrUnsupported, "more than it asked for"}, false},
		{"networks", "networks: [front, back]", wantProblem{"networks", 1, ErrWarning, "all services share the node's network; networks are ignored"}, true},
		{"network_mode bridge", "network_mode: bridge", wantProblem{"network_mode", 1, ErrWarning, "share the node's network"}, true},
		{"hostname", "hostname: api", wantProblem{"hostname", 1, ErrWarning, "ignored"}, true},
		{"logging", "logging:\n  driver: json-file", wantProblem{"logging", 1, ErrWarning, "engenho logs"}, true},
		{"ulimits", "ulimits: {nofile: 65536}", wantProblem{"ulimits", 1, ErrWarning, "ignored"}, true},
		{"deploy.placement", "deploy:\n  placement: {constraints: [x]}", wantProblem{"deploy.placement", 2, ErrWarning, "this node"}, true},
		{"ports long mode", "ports:\n  - {target: 80, published: 8080, mode: host, name: web, app_protocol: http}", wantProblem{"ports[0].mode", 2, ErrWarning, "balancer publishes"}, true},
		{"ports long bad mode", "ports:\n  - {target: 80, mode: swarm}", wantProblem{"ports[0].mode", 2, ErrValue, "want host or ingress"}, false},
		{"not Compose", "comand: run", wantProblem{"comand", 1, ErrUnknownKey, "did you mean command?"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, ps, warns := parseAll(t, stackYAML(tc.body, true), Options{})
			if tc.warn {
				if st == nil {
					t.Fatalf("refused:\n%s", problemLines(ps))
				}
				checkProblems(t, warns, []wantProblem{tc.want}, bodyOffset(true))
				return
			}
			checkProblems(t, ps, []wantProblem{tc.want}, bodyOffset(true))
		})
	}
	if _, err := Parse("t.yaml", []byte(stackYAML("build: .", true))); !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrUnknownKey) {
		t.Errorf("build: %v, want an ErrUnsupported (errors.Is) and no unknown key", err)
	}
	if _, _, warns := parseAll(t, stackYAML("network_mode: host", true), Options{}); len(warns) != 0 {
		t.Errorf("network_mode: host is what engenho does, but warned:\n%s", problemLines(warns))
	}

	top := "services: {a: {command: x}}\nnetworks: {front: {}}\nvolumes: {data: {}}\nx-anything: {a: 1}\nconfigs: {}\n"
	_, ps, warns := parseAll(t, top, Options{})
	checkProblems(t, ps, []wantProblem{
		{"/configs", 5, ErrUnsupported, "not supported yet"},
	}, 0)
	checkProblems(t, warns, []wantProblem{{"/networks", 2, ErrWarning, "networks are ignored"}}, 0)
}

// Every Compose key the parser knows is in docs/stackfile.md's table, and
// every honoured, ignored or refused service key is the parser's.
func TestComposeKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/stackfile.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := slices.Concat(serviceKeys, []string{"restart", "entrypoint", "expose", "labels", "container_name", "profiles", "scale"})
	for k := range composeServiceRules {
		keys = append(keys, k)
	}
	for k := range composeTopRules {
		keys = append(keys, k)
	}
	for k := range composeDeployRules {
		keys = append(keys, "deploy."+k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !strings.Contains(string(doc), "| `"+k+"` |") {
			t.Errorf("docs/stackfile.md has no table row for `%s`", k)
		}
	}
}

// The Compose fields survive the journal (Marshal, Unmarshal) and plan as
// unchanged against themselves.
func TestComposeFieldsJournal(t *testing.T) {
	src := `name: t
services:
  my_api:
    command: run
    labels: {a: "1"}
    container_name: api
    expose: ["80"]
    profiles: [web]
    depends_on:
      db: {restart: true, required: false}
  db:
    command: db
`
	st, err := ParseWith("t.yaml", []byte(src), Options{Profiles: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	back := roundTrip(t, st)
	if !reflect.DeepEqual(back.Services["my_api"], st.Services["my_api"]) {
		t.Errorf("after the journal:\n%+v\nwant\n%+v", back.Services["my_api"], st.Services["my_api"])
	}
	for _, c := range Plan(st, back) {
		if c.Action != ActionUnchanged {
			t.Errorf("%s after a round trip", c)
		}
	}
}

// SVC-1: a Compose file shaped like the ones projects ship (a web app, its
// database and a cache, with networks, restart, container names, labels and
// expose) loads as written, with one warning per network key, and means
// what Compose means.
func TestComposeProjectFileSVC1(t *testing.T) {
	src := `services:
  web:
    image: example/web:1.4
    container_name: web
    restart: unless-stopped
    entrypoint: ["/docker-entrypoint.sh"]
    command: ["gunicorn", "app:app"]
    ports:
      - "127.0.0.1:8000:8000"
    labels:
      - "traefik.enable=true"
      - "traefik.http.routers.web.rule=Host(` + "`example.com`" + `)"
    depends_on:
      db:
        condition: service_healthy
        restart: true
      redis:
        condition: service_started
    networks: [front, back]
  db:
    image: postgres:16
    restart: always
    expose:
      - 5432
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U postgres"]
      interval: 10s
      timeout: 5s
      retries: 5
    networks: [back]
  redis:
    image: redis:7
    restart: on-failure:3
    networks:
      - back
networks:
  front:
  back:
    driver: bridge
`
	st, ps, warns := parseAll(t, src, Options{})
	if st == nil {
		t.Fatalf("refused:\n%s", problemLines(ps))
	}
	if st.Name != "t" || !reflect.DeepEqual(st.StartOrder(), []string{"db", "redis", "web"}) {
		t.Errorf("stack %s order %v", st.Name, st.StartOrder())
	}
	web := st.Services["web"]
	if !reflect.DeepEqual(web.Argv(), []string{"/docker-entrypoint.sh", "gunicorn", "app:app"}) || web.Deploy.RestartPolicy.Condition != RestartAny {
		t.Errorf("web: %v %+v", web.Argv(), web.Deploy.RestartPolicy)
	}
	if web.Labels["traefik.http.routers.web.rule"] != "Host(`example.com`)" || !web.DependsOn[0].Restart {
		t.Errorf("web: %v %+v", web.Labels, web.DependsOn)
	}
	if rp := st.Services["redis"].Deploy.RestartPolicy; rp.Condition != RestartOnFailure || rp.MaxAttempts != 3 {
		t.Errorf("redis: %+v", rp)
	}
	checkProblems(t, warns, []wantProblem{
		{"services.web.networks", 19, ErrWarning, "networks are ignored"},
		{"services.db.networks", 30, ErrWarning, "networks are ignored"},
		{"services.redis.networks", 34, ErrWarning, "networks are ignored"},
		{"/networks", 36, ErrWarning, "networks are ignored"},
	}, 0)
}

// parseDir parses src as t.yaml in a directory holding files.
func parseDir(t *testing.T, files map[string]string, src string) (*Stack, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ParseWith(filepath.Join(dir, "t.yaml"), []byte(src), Options{Dir: dir})
}

// SVC-1: env_file's format raw keeps values as written: quotes and $ are
// part of the value (a password is not cut at its $); a line that is not
// NAME=value is an error naming its line.
func TestEnvFileFormatRawKeepsValuesAsWritten(t *testing.T) {
	st, err := parseDir(t, map[string]string{"a.env": "# comment\n\nPW=\"p$word\"\nURL=http://x/?a=b\n"},
		stackYAML("env_file: [{path: a.env, format: raw}]", true))
	if err != nil {
		t.Fatal(err)
	}
	env := st.Services["api"].Env
	if got := env["PW"].value; got != `"p$word"` {
		t.Errorf("PW = %q, want the raw \"p$word\"", got)
	}
	if got := env["URL"].value; got != "http://x/?a=b" {
		t.Errorf("URL = %q", got)
	}
	_, err = parseDir(t, map[string]string{"a.env": "A=1\nnot a pair\n"}, stackYAML("env_file: [{path: a.env, format: raw}]", true))
	if err == nil || !strings.Contains(err.Error(), ":2: ") || !strings.Contains(err.Error(), "not NAME=value") {
		t.Errorf("a bad raw line: %v, want its line number", err)
	}
}

// SVC-1: a name environment lists bare that nothing sets overrides
// env_file's value by unsetting it, as Compose does.
func TestEnvironmentBareUnsetOverridesEnvFile(t *testing.T) {
	st, err := parseDir(t, map[string]string{"a.env": "FOO=from-file\nBAR=kept\n"},
		stackYAML("env_file: a.env\nenvironment: [FOO]", true))
	if err != nil {
		t.Fatal(err)
	}
	env := st.Services["api"].Env
	if v, ok := env["FOO"]; ok {
		t.Errorf("FOO = %q, want it unset (environment lists it bare, nothing sets it)", v.value)
	}
	if env["BAR"].value != "kept" {
		t.Errorf("BAR = %q, want env_file's", env["BAR"].value)
	}
}

// SVC-1: deploy.mode global is one instance whatever order the keys come
// in; replicas or scale other than 1 beside it is an error.
func TestDeployModeGlobalIsOneInstanceInAnyOrder(t *testing.T) {
	for _, body := range []string{"deploy: {mode: global}", "deploy: {mode: global, replicas: 1}", "deploy: {replicas: 1, mode: global}"} {
		if n := mustParse(t, "t.yaml", stackYAML(body, true)).Services["api"].Deploy.Replicas; n != 1 {
			t.Errorf("%s: replicas %d, want 1", body, n)
		}
	}
	for _, body := range []string{"deploy: {mode: global, replicas: 3}", "deploy: {replicas: 3, mode: global}", "scale: 3\ndeploy: {mode: global}"} {
		_, err := Parse("t.yaml", []byte(stackYAML(body, true)))
		if err == nil || !strings.Contains(err.Error(), "deploy.mode is global") {
			t.Errorf("%s: %v, want an error naming the conflict", body, err)
		}
	}
}

// SVC-1: a command string runs no shell; a shell operator written in one
// unquoted is passed to the program, so the parse warns, naming it. Quoted,
// it is an argument on purpose and says nothing.
func TestCommandStringWithAShellOperatorWarns(t *testing.T) {
	for body, want := range map[string]string{
		`command: ./migrate && exec ./serve`: `"&&"`,
		`command: ./serve > /tmp/log`:        `">"`,
		`command: "echo 'a && b' \"c | d\""`: "",
		`command: [sh, -c, "a && b"]`:        "",
		`command: grep -e "x" file`:          "",
	} {
		_, ps, warns := parseAll(t, stackYAML(body, false), Options{})
		if len(ps) != 0 {
			t.Errorf("%s: problems %v", body, ps)
			continue
		}
		var got string
		for _, w := range warns {
			if strings.Contains(w.Msg, "runs no shell") {
				got = w.Msg
			}
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: warning %q, want one naming %s", body, got, want)
		}
	}
}

// SVC-1: a ${VAR} in an env file is looked up in the apply environment and
// .env first, then in the service's own environment (Compose's order), and
// never in a secret's value.
func TestEnvFileLooksUpTheServiceEnvironment(t *testing.T) {
	st, err := parseDir(t, map[string]string{"a.env": "URL=http://${HOST}/\nTOKEN_COPY=${TOKEN}\n"},
		stackYAML("env_file: a.env\nenvironment:\n  HOST: db\n  TOKEN: {value: s3cret, secret: true}", true))
	if err != nil {
		t.Fatal(err)
	}
	env := st.Services["api"].Env
	if got := env["URL"].value; got != "http://db/" {
		t.Errorf("URL = %q, want http://db/ (HOST from environment)", got)
	}
	if got := env["TOKEN_COPY"].value; got == "s3cret" {
		t.Errorf("TOKEN_COPY took the secret's value")
	}
	// SEC-2: a variable secret_env makes secret is not copied either.
	st, err = parseDir(t, map[string]string{"a.env": "DSN=pg://u:${DB_PASSWORD}@db/x\n"},
		stackYAML("env_file: a.env\nenvironment:\n  DB_PASSWORD: hunter2\nx-engenho:\n  secret_env: [DB_PASSWORD]", true))
	if err != nil {
		t.Fatal(err)
	}
	if dsn := st.Services["api"].Env["DSN"]; strings.Contains(dsn.value, "hunter2") {
		t.Errorf("DSN = %q took secret_env's value as a plain variable", dsn.value)
	}
	st, err = parseDirEnv(t, map[string]string{"a.env": "URL=http://${HOST}/\n"}, stackYAML("env_file: a.env\nenvironment: {HOST: db}", true),
		map[string]string{"HOST": "from-shell"})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Services["api"].Env["URL"].value; got != "http://from-shell/" {
		t.Errorf("URL = %q, want the apply environment's HOST first", got)
	}
}

// parseDirEnv is parseDir with an apply environment.
func parseDirEnv(t *testing.T, files map[string]string, src string, env map[string]string) (*Stack, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ParseWith(filepath.Join(dir, "t.yaml"), []byte(src), Options{Dir: dir, Env: env})
}
