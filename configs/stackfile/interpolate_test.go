package stackfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

func parseEnv(t *testing.T, src string, env map[string]string) *Stack {
	t.Helper()
	st, err := ParseWith("t.yaml", []byte(src), Options{Env: env})
	if err != nil {
		t.Fatalf("Parse:\n%v\n--- source:\n%s", err, src)
	}
	return st
}

// Compose interpolation (compose spec "Interpolation"): the forms and
// what each gives for a variable that is set, set but empty, and unset.
func TestInterpolationFormsCompose(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": "", "lower": "l"}
	cases := []struct{ in, want string }{
		{"${SET}", "v"}, {"$SET", "v"}, {"a-${SET}-b", "a-v-b"}, {"$SET$SET", "vv"},
		{"${UNSET}", ""}, {"x${UNSET}y", "xy"}, {"$lower", "l"},
		{"${SET:-d}", "v"}, {"${EMPTY:-d}", "d"}, {"${UNSET:-d}", "d"},
		{"${SET-d}", "v"}, {"${EMPTY-d}", ""}, {"${UNSET-d}", "d"},
		{"${SET:+alt}", "alt"}, {"${EMPTY:+alt}", ""}, {"${UNSET:+alt}", ""},
		{"${SET+alt}", "alt"}, {"${EMPTY+alt}", "alt"}, {"${UNSET+alt}", ""},
		{"${SET:?must}", "v"}, {"${EMPTY?must}", ""},
		{"${UNSET:-${SET}}", "v"}, {"${UNSET:-${UNSET2:-deep}}", "deep"},
		{"$$", "$"}, {"$$SET", "$SET"}, {"$${SET}", "${SET}"}, {"$$$SET", "$v"}, {"a $$ b", "a $ b"},
		{"$(hostname)", "$(hostname)"}, {"$1", "$1"}, {"100$", "100$"},
		// engenho's per-instance variables are filled when an instance starts.
		{"${ENGENHO_BIN}", "${ENGENHO_BIN}"}, {"$ENGENHO_DATA_DIR/x", "$ENGENHO_DATA_DIR/x"},
		{"${ENGENHO_X:-d}", "d"},
	}
	for _, c := range cases {
		src := stackYAML("command: [run, \""+strings.ReplaceAll(c.in, `"`, `\"`)+"\"]", false)
		st := parseEnv(t, src, env)
		if got := st.Services["api"].Command[1]; got != c.want {
			t.Errorf("%s = %q, want %q", c.in, got, c.want)
		}
	}
}

// Typed fields take the interpolated value as Compose casts them: an
// integer, a duration, a port, a bool; $$ and :? work there too.
func TestInterpolationTypedFieldsCompose(t *testing.T) {
	src := `name: t
services:
  api:
    image: "alpine:${VERSION:-v4}"
    command: ["${CMD:-run}"]
    ports: ["${HOST_PORT:-8080}:80", "${PORT2}"]
    stop_grace_period: ${GRACE:-7s}
    healthcheck:
      test: ["CMD-SHELL", "test $$(cat /x) = ok"]
      interval: ${INTERVAL:-5s}
      retries: ${RETRIES}
    deploy:
      replicas: ${N:-2}
    sidecars:
      - name: s
        command: [tick]
        always_on: ${ALWAYS:-true}
`
	st := parseEnv(t, src, map[string]string{"PORT2": "9000", "RETRIES": "7", "GRACE": ""})
	svc := st.Services["api"]
	if svc.Image != "alpine:v4" || svc.Command[0] != "run" {
		t.Errorf("image %q command %q", svc.Image, svc.Command)
	}
	if svc.Deploy.Replicas != 2 || svc.Healthcheck.Interval != 5*time.Second || svc.Healthcheck.Retries != 7 {
		t.Errorf("replicas %d interval %v retries %d", svc.Deploy.Replicas, svc.Healthcheck.Interval, svc.Healthcheck.Retries)
	}
	if svc.StopGracePeriod != 7*time.Second {
		t.Errorf("stop_grace_period %v: GRACE is empty, so :- gives the default", svc.StopGracePeriod)
	}
	if len(svc.Ports) != 2 || svc.Ports[0].Published != 8080 || svc.Ports[0].Target != 80 || svc.Ports[1].Target != 9000 {
		t.Errorf("ports %+v", svc.Ports)
	}
	if got := svc.Healthcheck.Exec; len(got) != 3 || got[2] != "test $(cat /x) = ok" {
		t.Errorf("healthcheck test %q: $$ is a literal $", got)
	}
	if !svc.Sidecars[0].AlwaysOn {
		t.Error("always_on: ${ALWAYS:-true} is the bool true")
	}
	if len(st.Warnings) != 0 {
		t.Errorf("warnings: %v", st.Warnings)
	}
}

// Every :? error is reported at once, each at its line and key, and an
// unset variable without a default is a warning that names it.
func TestInterpolationErrorsAndWarningsCompose(t *testing.T) {
	src := `name: t
services:
  api:
    command: [run, "${TAG}"]
    deploy:
      replicas: ${N:?set N to the replica count}
    healthcheck:
      test: [CMD, x]
      interval: ${I?}
  db:
    command: [db]
    ports: ["${P:?}"]
`
	_, err := ParseWith("t.yaml", []byte(src), Options{})
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("want a ParseError, got %v", err)
	}
	want := []struct {
		line int
		key  string
		msg  string
	}{
		{6, "services.api.deploy.replicas", "required variable N is not set: set N to the replica count"},
		{9, "services.api.healthcheck.interval", "required variable I is not set"},
		{12, "services.db.ports[0]", "required variable P is not set"},
	}
	if len(pe.Problems) != len(want) {
		t.Fatalf("problems:\n%v", err)
	}
	for i, w := range want {
		p := pe.Problems[i]
		if p.Line != w.line || p.Key != w.key || p.Msg != w.msg || !errors.Is(p.Err, ErrValue) {
			t.Errorf("problem %d = %s (line %d), want %d: %s: %s", i, p, p.Line, w.line, w.key, w.msg)
		}
	}
	if len(pe.Warnings) != 1 || pe.Warnings[0].Line != 4 || !strings.Contains(pe.Warnings[0].Msg, "variable TAG is not set") {
		t.Errorf("warnings: %v", pe.Warnings)
	}
	_, err = ParseWith("t.yaml", []byte(stackYAML(`command: ["${BAD"]`, false)), Options{})
	if err == nil || !strings.Contains(err.Error(), "t.yaml:4: services.api.command[0]: invalid interpolation") {
		t.Errorf("an unclosed ${: %v", err)
	}
}

// The parser reads no environment but the one it is given: not its own.
func TestInterpolationNeverTheProcessEnvironment(t *testing.T) {
	t.Setenv("ENGENHO_TEST_LEAK", "from-the-daemon")
	st := parseEnv(t, stackYAML(`command: [run, "${ENGENHO_TEST_LEAK:-}${HOME:-nohome}"]`, false), nil)
	if got := st.Services["api"].Command[1]; got != "nohome" {
		t.Errorf("got %q: the process environment leaked in", got)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// .env beside the stack file: Compose's format; the apply environment
// wins over it; its own lines may use the apply environment.
func TestDotEnvCompose(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, ".env", "# comment\nTAG=from-dotenv\nPORT=8081\nexport QUOTED=\"a b\"\nREF=${FROM_SHELL}-x\n")
	path := writeFile(t, dir, "web.yaml", stackYAML(`command: [run, "${TAG}", "${QUOTED}", "${REF}"]
ports: ["${PORT}:80"]`, false))
	data, _ := os.ReadFile(path)
	st, err := ParseWith(path, data, Options{Dir: dir, Env: map[string]string{"PORT": "9090", "FROM_SHELL": "sh"}})
	if err != nil {
		t.Fatal(err)
	}
	svc := st.Services["api"]
	if got := svc.Command[1:]; got[0] != "from-dotenv" || got[1] != "a b" || got[2] != "sh-x" {
		t.Errorf("command %q", got)
	}
	if svc.Ports[0].Published != 9090 {
		t.Errorf("published %d: the apply environment wins over .env", svc.Ports[0].Published)
	}
	fromFile, err := ParseFile(path)
	if err != nil || fromFile.Services["api"].Command[1] != "from-dotenv" {
		t.Errorf("ParseFile reads the .env beside the file: %v", err)
	}
	if st, err := ParseWith(path, data, Options{Env: map[string]string{"PORT": "1"}}); err != nil || st.Services["api"].Command[1] != "" {
		t.Errorf("without Dir no .env is read: %v", err)
	}
}

// A damaged .env is one problem naming its file and line, without its text.
func TestDotEnvDamaged(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, ".env", "OK=1\nPW=\"s3cr3t-value\n")
	_, err := ParseWith("web.yaml", []byte(stackYAML("command: run", false)), Options{Dir: dir})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), ".env:") {
		t.Fatalf("damaged .env: %v", err)
	}
}

// Compose's `environment` (and engenho's spelling `env`): map and list; a
// key with no value takes the apply environment's value, and is left
// unset with a warning when there is none.
func TestEnvironmentCompose(t *testing.T) {
	env := map[string]string{"FROM_SHELL": "s", "EMPTY": ""}
	for _, body := range []string{
		"environment:\n  A: 1\n  B: \"true\"\n  FROM_SHELL:\n  EMPTY:\n  MISSING:",
		"environment: [A=1, B=true, FROM_SHELL, EMPTY, MISSING]",
		"env: [A=1, B=true, FROM_SHELL, EMPTY, MISSING]",
	} {
		st := parseEnv(t, stackYAML("command: run\n"+body, false), env)
		got := st.Services["api"].Env
		want := map[string]string{"A": "1", "B": "true", "FROM_SHELL": "s", "EMPTY": ""}
		if len(got) != len(want) {
			t.Errorf("%s: %d variables, want %d", body, len(got), len(want))
		}
		for k, v := range want {
			if e, ok := got[k]; !ok || e.Reveal() != v {
				t.Errorf("%s: %s = %q (set %v), want %q", body, k, e.Reveal(), ok, v)
			}
		}
		if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0].Msg, "MISSING has no value here") || !strings.HasSuffix(st.Warnings[0].Key, ".MISSING") {
			t.Errorf("%s: warnings %v", body, st.Warnings)
		}
	}
	ps := parseProblems(t, "t.yaml", stackYAML("command: run\nenv: {A: 1}\nenvironment: {B: 2}", false))
	if len(ps) != 1 || ps[0].Line != 6 || !strings.Contains(ps[0].Msg, "environment and env (line 5) are the same key") {
		t.Errorf("env and environment: %v", ps)
	}
}

// env_file: Compose's precedence (later files override earlier ones,
// environment overrides them all), required, and paths relative to the
// project directory.
func TestEnvFileCompose(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.env", "A=from-a\nB=from-a\nC=from-a\n")
	writeFile(t, dir, "b.env", "B=from-b\nC=${SHELLVAR}\n")
	src := stackYAML(`command: run
env_file:
  - a.env
  - path: b.env
  - path: missing.env
    required: false
environment:
  C: from-environment`, false)
	st, err := ParseWith(filepath.Join(dir, "s.yaml"), []byte(src), Options{Dir: dir, Env: map[string]string{"SHELLVAR": "sv"}})
	if err != nil {
		t.Fatal(err)
	}
	env := st.Services["api"].Env
	for k, v := range map[string]string{"A": "from-a", "B": "from-b", "C": "from-environment"} {
		if env[k].Reveal() != v {
			t.Errorf("%s = %q, want %q", k, env[k].Reveal(), v)
		}
	}
	st, err = ParseWith("s.yaml", []byte(stackYAML("command: run\nenv_file: b.env", false)), Options{Dir: dir, Env: map[string]string{"SHELLVAR": "sv"}})
	if err != nil || st.Services["api"].Env["C"].Reveal() != "sv" {
		t.Errorf("an env_file's ${VAR} takes the apply environment: %v", err)
	}

	ps := parseProblems(t, "s.yaml", stackYAML("command: run\nenv_file: [nope.env, {path: a.env, format: json}]", false))
	if len(ps) != 3 || !strings.Contains(ps[0].Msg, "a relative path needs the stack file's directory") || ps[1].Key != "services.api.env_file[1].path" ||
		!strings.Contains(ps[2].Msg, "format \"json\" is not supported") {
		t.Errorf("problems without a directory: %v", ps)
	}
	_, err = ParseWith("s.yaml", []byte(stackYAML("command: run\nenv_file: nope.env", false)), Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "services.api.env_file: "+filepath.Join(dir, "nope.env")+" does not exist") {
		t.Errorf("a missing required env_file: %v", err)
	}
}

// RenderYAML is the normalized stack: interpolated, defaults applied,
// durations as written in a file, secrets redacted, services in file order.
func TestRenderNormalized(t *testing.T) {
	src := `name: shop
services:
  web:
    image: "alpine:${V:-3}"
    command: ["sh", "-c", "echo $$HOME"]
    env:
      PW: {value: s3cr3t, secret: true}
      PLAIN: shown
    healthcheck: {test: [CMD, "true"], interval: 5s}
    deploy: {replicas: 2}
  db:
    command: [db]
`
	st := parseEnv(t, src, nil)
	out, err := RenderYAML(st)
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{"image: alpine:3", "interval: 5s", "PW: " + Redaction, "PLAIN: shown", "replicas: 2", "echo $HOME"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered YAML lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "s3cr3t") || strings.Index(text, "web:") > strings.Index(text, "db:") {
		t.Errorf("a secret shows, or file order is lost:\n%s", text)
	}
	js, err := RenderJSON(st)
	if err != nil || strings.Contains(string(js), "s3cr3t") || !strings.Contains(string(js), `"interval": "5s"`) {
		t.Errorf("JSON: %v\n%s", err, js)
	}
}

// A sidecar takes `environment` too; env and environment together are
// one key given twice.
func TestSidecarEnvironment(t *testing.T) {
	st := parseEnv(t, stackYAML("command: run\nsidecars:\n  - name: s\n    command: [tick]\n    environment: [FROM_SHELL, A=1]", false), map[string]string{"FROM_SHELL": "v"})
	if env := st.Services["api"].Sidecars[0].Env; env["FROM_SHELL"].Reveal() != "v" || env["A"].Reveal() != "1" {
		t.Errorf("sidecar env: %d variables", len(env))
	}
	ps := parseProblems(t, "t.yaml", stackYAML("command: run\nsidecars:\n  - name: s\n    command: [tick]\n    env: {A: 1}\n    environment: {B: 2}", false))
	if len(ps) != 1 || !strings.Contains(ps[0].Msg, "env and environment are the same key") {
		t.Errorf("problems: %v", ps)
	}
}

// An env_file or .env that is a FIFO is refused as not a regular file,
// not read: a read would hang the parse (and the daemon's apply).
func TestEnvFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.env"), 0o600); err != nil {
		t.Skipf("SKIP mkfifo: %v", err)
	}
	_, err := ParseWith("s.yaml", []byte(stackYAML("command: run\nenv_file: pipe.env", false)), Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "pipe.env:1: not a regular file") {
		t.Errorf("a FIFO env_file: %v", err)
	}
}

// SVC-1: a default that is used and refers to an unset variable warns, as
// a plain reference does (${X:-$Y} with both unset is ""); one whose inner
// reference has a default of its own, or whose outer variable is set, or a
// literal $$, does not.
func TestInterpolationWarnsOfAnUnsetVariableInADefault(t *testing.T) {
	cases := map[string][]string{
		`"${X:-$Y}"`:      {"Y"},
		`"${X-${Y}}"`:     {"Y"},
		`"${X:-a-$Y-$Z}"`: {"Y", "Z"},
		`"${X:-${Y:-z}}"`: nil,
		`"${SET:-$Y}"`:    nil,
		`"${X:-$$Y}"`:     nil,
		`"${X:-$SET}"`:    nil,
	}
	for value, want := range cases {
		_, _, warns := parseAll(t, stackYAML("environment: {A: "+value+"}", true), Options{Env: map[string]string{"SET": "1"}})
		var got []string
		for _, w := range warns {
			var name string
			if _, err := fmt.Sscanf(w.Msg, "variable %s is not set", &name); err == nil {
				got = append(got, name)
			}
		}
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("A: %s: warned of %v, want %v", value, got, want)
		}
	}
}
