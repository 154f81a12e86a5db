package stackfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/engenho/engenho/drivers"
)

const fileSecret = "db-password-0123456789"

// secretsProject writes a project directory with a secret file and
// returns it.
func secretsProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "db_password.txt", fileSecret)
	return dir
}

func parseIn(dir, src string, env map[string]string) (*Stack, error) {
	return ParseWith(filepath.Join(dir, "s.yaml"), []byte(src), Options{Dir: dir, Env: env})
}

// Compose `secrets:` (compose spec "secrets" top-level element and the
// service attribute): file: relative to the project directory, read at
// apply; environment: from the apply environment or .env; the short form
// mounts NAME as NAME mode 0400; the long form sets target and mode; an
// absolute target is allowed only as /run/secrets/NAME.
func TestSecretsParseCompose(t *testing.T) {
	dir := secretsProject(t)
	writeFile(t, dir, ".env", "FROM_DOTENV=dotenv-value\n")
	head := "name: t\nsecrets:\n  db_password: {file: ./db_password.txt}\n  api_key: {environment: API_KEY}\n  dotted: {environment: FROM_DOTENV}\nservices:\n  api:\n    command: run\n    secrets:\n"
	cases := []struct {
		name  string
		items string
		want  []ServiceSecret
	}{
		{"short syntax: target is the name, mode 0400", "      - db_password\n",
			[]ServiceSecret{{Source: "db_password", Target: "db_password", Mode: 0o400, File: filepath.Join(dir, "db_password.txt")}}},
		{"long syntax: target and octal mode", "      - {source: db_password, target: pw, mode: 0440}\n",
			[]ServiceSecret{{Source: "db_password", Target: "pw", Mode: 0o440, File: filepath.Join(dir, "db_password.txt")}}},
		{"long syntax: 0o mode, string mode, decimal mode", "      - {source: db_password, target: a, mode: 0o444}\n      - {source: db_password, target: b, mode: \"0600\"}\n      - {source: db_password, target: c, mode: 288}\n",
			[]ServiceSecret{
				{Source: "db_password", Target: "a", Mode: 0o444, File: filepath.Join(dir, "db_password.txt")},
				{Source: "db_password", Target: "b", Mode: 0o600, File: filepath.Join(dir, "db_password.txt")},
				{Source: "db_password", Target: "c", Mode: 0o440, File: filepath.Join(dir, "db_password.txt")},
			}},
		{"absolute target under /run/secrets is its file name", "      - {source: db_password, target: /run/secrets/db}\n",
			[]ServiceSecret{{Source: "db_password", Target: "db", Mode: 0o400, File: filepath.Join(dir, "db_password.txt")}}},
		{"environment source, long syntax without target", "      - source: api_key\n",
			[]ServiceSecret{{Source: "api_key", Target: "api_key", Mode: 0o400, Environment: "API_KEY"}}},
		{"environment source from .env", "      - dotted\n",
			[]ServiceSecret{{Source: "dotted", Target: "dotted", Mode: 0o400, Environment: "FROM_DOTENV"}}},
	}
	values := map[string]string{"db_password": fileSecret, "api_key": "key-from-shell", "dotted": "dotenv-value"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := parseIn(dir, head+tc.items, map[string]string{"API_KEY": "key-from-shell"})
			if err != nil {
				t.Fatal(err)
			}
			got := st.Services["api"].Secrets
			if len(got) != len(tc.want) {
				t.Fatalf("secrets = %+v, want %+v", got, tc.want)
			}
			for i, g := range got {
				w := tc.want[i]
				if !g.Value.IsSecret() || g.Value.Reveal() != values[g.Source] {
					t.Errorf("secret %s: value is not the secret source's (secret=%v)", g.Source, g.Value.IsSecret())
				}
				g.Value = EnvValue{}
				if g != w {
					t.Errorf("secret %d = %+v, want %+v", i, g, w)
				}
			}
			if len(st.Warnings) != 0 {
				t.Errorf("warnings: %v", st.Warnings)
			}
		})
	}
}

// Everything wrong with secrets is reported at once, each at FILE:LINE:
// KEY, and no message quotes a value.
func TestSecretsProblemsCompose(t *testing.T) {
	dir := secretsProject(t)
	writeFile(t, dir, "big", strings.Repeat("x", MaxSecretBytes+1))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := `name: t
secrets:
  ok: {file: db_password.txt}
  missing: {file: nope.txt}
  big: {file: big}
  dir: {file: .}
  fifo: {file: fifo}
  both: {file: db_password.txt, environment: X}
  none: {}
  unset: {environment: NOT_SET}
  ext: {external: true}
  inline: {content: "hunter2"}
  drv: {driver: vault}
  typo: {flie: x}
  "a/b": {file: db_password.txt}
services:
  api:
    command: run
    secrets:
      - ok
      - undefined
      - {source: ok, target: /etc/pw}
      - {source: ok, target: ok}
      - {source: ok, target: x, mode: 0999}
      - {target: y}
      - {source: ok, target: z, colour: red}
      - {source: ok, target: ".."}
      - {source: ok, target: zero, mode: 0}
    x-engenho: {secrets: {on_change: sometimes}}
`
	_, err := parseIn(dir, src, nil)
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *ParseError, got %v", err)
	}
	want := []struct {
		line int
		key  string
		kind error
		msg  string
	}{
		{4, "secrets.missing.file", ErrValue, "nope.txt: does not exist"},
		{5, "secrets.big.file", ErrValue, fmt.Sprintf("larger than %d bytes", MaxSecretBytes)},
		{6, "secrets.dir.file", ErrValue, "is a directory"},
		{7, "secrets.fifo.file", ErrValue, "not a regular file"},
		{8, "secrets.both.environment", ErrValue, "one source: file (line 8) or environment"},
		{9, "secrets.none", ErrMissing, "needs file: PATH or environment: VAR"},
		{10, "secrets.unset.environment", ErrValue, "NOT_SET is not set"},
		{11, "secrets.ext.external", ErrValue, "external secrets"},
		{12, "secrets.inline.content", ErrValue, "plaintext"},
		{13, "secrets.drv.driver", ErrValue, "Swarm's"},
		{14, "secrets.typo.flie", ErrUnknownKey, "did you mean file?"},
		{15, "secrets.a/b", ErrValue, "cannot hold /"},
		{21, "services.api.secrets[1]", ErrValue, `"undefined" is not defined in the top-level secrets (defined: `},
		{22, "services.api.secrets[2].target", ErrValue, "secrets are files in /run/secrets"},
		{23, "services.api.secrets[3]", ErrValue, `target "ok" is given twice (first at line 20)`},
		{24, "services.api.secrets[4].mode", ErrValue, "want a file mode from 0 to 0777"},
		{25, "services.api.secrets[5].source", ErrMissing, "required"},
		{26, "services.api.secrets[6].colour", ErrUnknownKey, "unknown key"},
		{27, "services.api.secrets[7].target", ErrValue, "cannot be . or .."},
		{28, "services.api.secrets[8].mode", ErrValue, "mode 0 leaves the file unreadable"},
		{29, "services.api.x-engenho.secrets.on_change", ErrValue, `want restart or none, got "sometimes"`},
	}
	if len(pe.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(pe.Problems), len(want), err)
	}
	for i, w := range want {
		if i >= len(pe.Problems) {
			break
		}
		p := pe.Problems[i]
		if p.Line != w.line || p.Key != w.key || !errors.Is(p.Err, w.kind) || !strings.Contains(p.Msg, w.msg) {
			t.Errorf("problem %d = %s (%v), want line %d %s: ...%s", i, p, p.Err, w.line, w.key, w.msg)
		}
	}
	if strings.Contains(err.Error(), fileSecret) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("an error quotes a secret value: %v", err)
	}
	// Without a project directory a relative file is refused, not read.
	ps := parseProblems(t, "s.yaml", "secrets:\n  a: {file: pw}\nservices:\n  x:\n    command: run\n    secrets: [a]\n")
	if len(ps) != 1 || ps[0].Key != "secrets.a.file" || !strings.Contains(ps[0].Msg, "a relative path needs the stack file's directory") {
		t.Errorf("relative file without a directory: %v", ps)
	}
}

// What engenho does not keep loads with a warning that names the key:
// a secret's name and labels (no store to name it in), uid and gid (the
// files belong to the service's user).
func TestSecretsWarningsCompose(t *testing.T) {
	dir := secretsProject(t)
	src := "secrets:\n  pw: {file: db_password.txt, name: prod_pw, labels: {a: b}, x-note: 1}\nservices:\n  x:\n    command: run\n    secrets: [{source: pw, uid: \"103\", gid: \"103\"}]\n"
	st, err := parseIn(dir, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, w := range st.Warnings {
		keys = append(keys, w.Key)
		if !errors.Is(w.Err, ErrWarning) {
			t.Errorf("warning kind %v", w.Err)
		}
	}
	if got := strings.Join(keys, " "); got != "secrets.pw.name secrets.pw.labels services.x.secrets[0].uid services.x.secrets[0].gid" {
		t.Errorf("warnings: %v", st.Warnings)
	}
}

// x-engenho.secrets.on_change: restart (the default) puts each secret's
// keyed digest in the revision, so a new value rolls the service and its
// sidecars; none leaves the value out (a new value reaches only instances
// started after it), and both keep target and mode in.
func TestSecretsRevisionOnChangeSEC2(t *testing.T) {
	dir := secretsProject(t)
	src := func(policy, mode string) string {
		return "secrets:\n  pw: {file: db_password.txt}\nservices:\n  x:\n    command: run\n    secrets: [{source: pw, mode: " + mode + "}]\n" +
			"    sidecars: [{name: job, command: [job]}]\n" + policy
	}
	type revs struct{ svc, sidecar string }
	rev := func(policy, mode, value string) revs {
		t.Helper()
		writeFile(t, dir, "db_password.txt", value)
		st, err := parseIn(dir, src(policy, mode), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.BindSecrets(testKey); err != nil {
			t.Fatal(err)
		}
		svc := st.Services["x"]
		return revs{svc.Revision(), svc.SidecarRevision(svc.Sidecars[0])}
	}
	none := "    x-engenho: {secrets: {on_change: none}}\n"
	cases := []struct {
		name   string
		a, b   revs
		differ bool
	}{
		{"restart (default): a rotated value is a new revision", rev("", "0400", "one"), rev("", "0400", "two"), true},
		{"restart written out is the default", rev("", "0400", "one"), rev("    x-engenho: {secrets: {on_change: restart}}\n", "0400", "one"), false},
		{"none: a rotated value keeps the revision", rev(none, "0400", "one"), rev(none, "0400", "two"), false},
		{"none: a new mode is still a new revision", rev(none, "0400", "one"), rev(none, "0440", "one"), true},
	}
	for _, tc := range cases {
		if (tc.a.svc != tc.b.svc) != tc.differ || (tc.a.sidecar != tc.b.sidecar) != tc.differ {
			t.Errorf("%s: %v vs %v, want differ=%v", tc.name, tc.a, tc.b, tc.differ)
		}
	}
	// The revision hashes the keyed digest, not the value.
	writeFile(t, dir, "db_password.txt", "one")
	st, _ := parseIn(dir, src("", "0400"), nil)
	unbound := st.Services["x"].Revision()
	_ = st.BindSecrets(testKey)
	if st.Services["x"].Revision() == unbound || st.Services["x"].Secrets[0].Digest() == "" {
		t.Error("a bound revision must hash the node key's digest of the secret")
	}
}

// SEC-2 for secret files: the journal keeps each value only sealed and
// reads it back (same revision, same bytes); JSON, YAML, fmt, the
// rendering of `engenho config` and Redacted never show it; the driver
// spec of an instance and of a sidecar carries it with its target and
// mode, and Validate's copy withholds it.
func TestSecretsJournalAndSpecSEC2(t *testing.T) {
	dir := secretsProject(t)
	src := "secrets:\n  pw: {file: db_password.txt}\nservices:\n  x:\n    command: run\n    secrets: [{source: pw, target: db, mode: 0440}]\n    sidecars: [{name: job, command: [job]}]\n"
	st, err := parseIn(dir, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.BindSecrets(testKey); err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(st, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(fileSecret)) || !bytes.Contains(data, []byte(`"value":{"secret":true,"sealed":"v1:`)) {
		t.Fatalf("journal form: %s", data)
	}
	back, err := Unmarshal(data, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Services["x"].Secrets[0]; got.Value.Reveal() != fileSecret || !got.Value.IsSecret() || got.Target != "db" || got.Mode != 0o440 {
		t.Fatalf("secret through the journal: %+v", got)
	}
	if back.Services["x"].Revision() != st.Services["x"].Revision() {
		t.Error("revision changed through the journal")
	}
	if again, _ := Marshal(back, testKey); !bytes.Equal(again, data) {
		t.Error("a record read back writes other bytes")
	}
	if _, err := Marshal(st, nil); !errors.Is(err, ErrNoNodeKey) {
		t.Errorf("Marshal without a key: %v", err)
	}

	j, _ := json.Marshal(st)
	y, _ := RenderYAML(st)
	rj, _ := RenderJSON(st)
	red, _ := json.Marshal(st.Redacted())
	for what, out := range map[string]string{
		"json": string(j), "config yaml": string(y), "config json": string(rj), "redacted": string(red),
		"fmt": fmt.Sprintf("%v %+v %#v", st.Services["x"], st.Services["x"].Secrets, st.Services["x"].Secrets),
	} {
		if strings.Contains(out, fileSecret) {
			t.Errorf("%s shows the secret: %s", what, out)
		}
	}
	if !strings.Contains(string(y), "target: db") || !strings.Contains(string(y), `mode: "0440"`) || strings.Contains(string(y), "value:") {
		t.Errorf("engenho config shows the secret's name and target, never a value field:\n%s", y)
	}

	svc := st.Services["x"]
	inst := Instance{Stack: "s", Slot: 1, ID: "a1"}
	wantFile := []drivers.SecretFile{{Name: "db", Value: fileSecret, Mode: 0o440}}
	for what, spec := range map[string]drivers.Spec{"instance": InstanceSpec(svc, inst), "sidecar": SidecarSpec(svc, svc.Sidecars[0], inst)} {
		if len(spec.Secrets) != 1 || spec.Secrets[0] != wantFile[0] {
			t.Errorf("%s spec secrets = %d files, want db 0440 with the value", what, len(spec.Secrets))
		}
	}
	if w := withhold(InstanceSpec(svc, inst), svc.Env); w.Secrets[0].Value != "" {
		t.Error("Validate's spec must withhold secret file values")
	}
	if InstanceSpec(svc, inst).Secrets[0].Value != fileSecret {
		t.Error("withhold changed the caller's spec")
	}
}

// SVC-4 for secrets: a rotated value is an update (on_change restart) or a
// reconfigure (none) whose changed field names the secret's file, never
// the value; an unchanged value is unchanged.
func TestSecretsPlanNamesTheSecret(t *testing.T) {
	dir := secretsProject(t)
	src := "secrets:\n  pw: {file: db_password.txt}\nservices:\n  a:\n    command: run\n    secrets: [{source: pw, target: db}]\n" +
		"  b:\n    command: run\n    secrets: [pw]\n    x-engenho: {secrets: {on_change: none}}\n"
	parse := func(value string) *Stack {
		t.Helper()
		writeFile(t, dir, "db_password.txt", value)
		st, err := parseIn(dir, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.BindSecrets(testKey); err != nil {
			t.Fatal(err)
		}
		return st
	}
	one, two := parse("one-value"), parse("two-value")
	for _, c := range Plan(one, parse("one-value")) {
		if c.Action != ActionUnchanged {
			t.Errorf("same value: %s", c)
		}
	}
	changes := Plan(one, two)
	want := map[string]string{"a": "a: update (secrets.db)", "b": "b: reconfigure (secrets.pw)"}
	for _, c := range changes {
		s := c.String()
		if !strings.HasPrefix(s, strings.Split(want[c.Service], " (")[0]) || !strings.HasSuffix(s, "("+strings.Split(want[c.Service], "(")[1]) {
			t.Errorf("plan %s, want like %q", s, want[c.Service])
		}
		if strings.Contains(s, "value") {
			t.Errorf("plan shows a value: %s", s)
		}
	}
}
