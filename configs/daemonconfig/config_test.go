package daemonconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/drivers/probe"
	"github.com/engenho/engenho/runtime/journal"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// writeFile writes content to dir/name (creating parents) and returns the
// path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// load writes content as DIR/engenho.yaml and loads it.
func load(t *testing.T, content string) (*Config, string, error) {
	t.Helper()
	dir := t.TempDir()
	p := writeFile(t, dir, "engenho.yaml", content)
	c, _, err := Load(p)
	return c, p, err
}

func mustLoad(t *testing.T, content string) *Config {
	t.Helper()
	c, _, err := load(t, content)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return c
}

// errorsOf returns the *Error values inside err.
func errorsOf(t *testing.T, err error) []*Error {
	t.Helper()
	var list Errors
	if errors.As(err, &list) {
		return list
	}
	var one *Error
	if errors.As(err, &one) {
		return []*Error{one}
	}
	t.Fatalf("error %v (%T) is not a config error", err, err)
	return nil
}

// TestDMN15Defaults: a file with no settings gives the spec's defaults.
func TestDMN15Defaults(t *testing.T) {
	c := mustLoad(t, "{}\n")
	want := Defaults()
	want.Node.Name = hostname()
	want.Objstore.FS.Dir = "/var/lib/engenho/objstore"
	want.File = c.File
	want.StackFiles = nil
	got := *c
	got.Warnings = nil
	if !reflect.DeepEqual(&got, &want) {
		t.Fatalf("defaults differ:\ngot  %s\nwant %s", got.String(), want.String())
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"data_dir", c.DataDir, "/var/lib/engenho"},
		{"log.level", c.Log.Level, "info"},
		{"log.format", c.Log.Format, "auto"},
		{"control.idle_timeout", c.Control.IdleTimeout, 5 * time.Minute},
		{"control.max_request", c.Control.MaxRequest, Size(1 << 20)},
		{"drivers.process.enabled", c.Drivers.Process.Enabled, true},
		{"drivers.incus.enabled", c.Drivers.Incus.Enabled, false},
		{"drivers.incus.socket", c.Drivers.Incus.Socket, "/var/lib/incus/unix.socket"},
		{"objstore.kind", c.Objstore.Kind, "fs"},
		{"edge.listen", c.Edge.Listen, ""},
		{"metrics.listen", c.Metrics.Listen, ""},
		{"supervision.strategy", c.Supervision.Strategy, "one_for_one"},
		{"supervision.max_restarts", c.Supervision.MaxRestarts, 3},
		{"supervision.period", c.Supervision.Period, 5 * time.Second},
		{"sweep.interval", c.Sweep.Interval, 10 * time.Second},
		{"drain.budget", c.Drain.Budget, 60 * time.Second},
		{"chaos.enabled", c.Chaos.Enabled, false},
		// The defaults of other packages, so the daemon config and the
		// packages it configures cannot drift apart.
		{"supervision.ladder", ladderOf(c.Supervision.Ladder), ladder.Default()},
		{"probe.interval", c.Probe.Interval, probe.DefaultInterval},
		{"probe.timeout", c.Probe.Timeout, probe.DefaultTimeout},
		{"probe.start_interval", c.Probe.StartInterval, probe.DefaultStartInterval},
		{"probe.retries", c.Probe.Retries, probe.DefaultRetries},
		{"journal.events.max_count", c.Journal.Events.MaxCount, journal.DefaultMaxEvents},
		{"journal.events.max_age", c.Journal.Events.MaxAge, journal.DefaultMaxEventAge},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestFileValues(t *testing.T) {
	c := mustLoad(t, `
node: {name: node-1}
log: {level: debug, format: json}
control: {group: "1000", idle_timeout: 90s, max_request: 512KiB}
drivers:
  process: {log_max_bytes: 1048576, log_files: 5}
  incus: {enabled: true, project: web, profiles: [default, big]}
objstore:
  kind: s3
  prefix: /fleet/prod/
  s3: {endpoint: "http://127.0.0.1:9000", bucket: b, path_style: true, part_size: 8MiB}
edge: {listen: "127.0.0.1:8088"}
supervision:
  strategy: rest_for_one
  ladder: {immediate: 1, delays: [1s, 2s], cap: 1m, jitter: 0.2}
journal: {events: {max_count: 0, max_age: 0}}
`)
	if c.Node.Name != "node-1" || c.Log.Level != "debug" || c.Log.Format != "json" {
		t.Errorf("node/log: %+v %+v", c.Node, c.Log)
	}
	if c.Control.Group != "1000" || c.Control.IdleTimeout != 90*time.Second || c.Control.MaxRequest != 512*KiB {
		t.Errorf("control: %+v", c.Control)
	}
	if c.Drivers.Process.LogMaxBytes != MiB || c.Drivers.Process.LogFiles != 5 {
		t.Errorf("process: %+v", c.Drivers.Process)
	}
	if !c.Drivers.Incus.Enabled || c.Drivers.Incus.Project != "web" || !reflect.DeepEqual(c.Drivers.Incus.Profiles, []string{"default", "big"}) {
		t.Errorf("incus: %+v", c.Drivers.Incus)
	}
	if c.Objstore.Prefix != "fleet/prod" || !c.Objstore.S3.PathStyle || c.Objstore.S3.PartSize != 8*MiB {
		t.Errorf("objstore: %+v", c.Objstore)
	}
	l := c.Supervision.Ladder
	if c.Supervision.Strategy != "rest_for_one" || l.Immediate != 1 || !reflect.DeepEqual(l.Delays, []time.Duration{time.Second, 2 * time.Second}) || l.Cap != time.Minute || l.Jitter != 0.2 {
		t.Errorf("supervision: %+v", c.Supervision)
	}
	if n, a := c.Journal.Events.Retention(); n != -1 || a != -1 {
		t.Errorf("retention of 0/0 = %d %s, want no bounds (-1)", n, a)
	}
}

// TestDMN15EnvOverrides: ENGENHO_SECTION_KEY beats the file, which beats
// the default.
func TestDMN15EnvOverrides(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", "name: a\n")
	writeFile(t, dir, "b.yaml", "name: b\n")
	p := writeFile(t, dir, "engenho.yaml", `
log: {level: warn}
edge: {listen: "127.0.0.1:8088"}
sweep: {interval: 30s}
`)
	t.Setenv("ENGENHO_LOG_LEVEL", "debug")
	t.Setenv("ENGENHO_EDGE_LISTEN", "") // set but empty: turns the edge off
	t.Setenv("ENGENHO_METRICS_LISTEN", "127.0.0.1:9477")
	t.Setenv("ENGENHO_DRIVERS_PROCESS_ENABLED", "false")
	t.Setenv("ENGENHO_DRIVERS_INCUS_ENABLED", "true")
	t.Setenv("ENGENHO_DRIVERS_PROCESS_LOG_MAX_BYTES", "2MiB")
	t.Setenv("ENGENHO_STACKS", "a.yaml, b.yaml")
	t.Setenv("ENGENHO_SUPERVISION_LADDER_DELAYS", "1s,2s")
	t.Setenv("ENGENHO_OBJSTORE_KIND", "s3")
	t.Setenv("ENGENHO_OBJSTORE_S3_BUCKET", "bkt")
	t.Setenv("ENGENHO_OBJSTORE_S3_ACCESS_KEY", "AKID")
	t.Setenv("ENGENHO_OBJSTORE_S3_SECRET_KEY", "s3cr3t-from-env")
	t.Setenv("ENGENHO_LOG_LEVL", "debug") // a typo: warned about
	c, _, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Log.Level != "debug" {
		t.Errorf("log.level = %q, want the env's debug", c.Log.Level)
	}
	if c.Edge.Listen != "" {
		t.Errorf("edge.listen = %q, want off (empty env)", c.Edge.Listen)
	}
	if c.Sweep.Interval != 30*time.Second {
		t.Errorf("sweep.interval = %s, want the file's 30s", c.Sweep.Interval)
	}
	if c.Metrics.Listen != "127.0.0.1:9477" || c.Drivers.Process.Enabled || !c.Drivers.Incus.Enabled || c.Drivers.Process.LogMaxBytes != 2*MiB {
		t.Errorf("env values not applied: %+v %+v", c.Metrics, c.Drivers)
	}
	if want := []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")}; !reflect.DeepEqual(c.StackFiles, want) {
		t.Errorf("stacks from env = %v, want %v", c.StackFiles, want)
	}
	if want := []time.Duration{time.Second, 2 * time.Second}; !reflect.DeepEqual(c.Supervision.Ladder.Delays, want) {
		t.Errorf("ladder delays = %v, want %v", c.Supervision.Ladder.Delays, want)
	}
	if c.Objstore.S3.SecretKey.Reveal() != "s3cr3t-from-env" || c.Objstore.S3.Bucket != "bkt" {
		t.Errorf("s3 from env: %+v", c.Objstore.S3)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "ENGENHO_LOG_LEVL") {
		t.Errorf("warnings = %q, want one naming ENGENHO_LOG_LEVL", c.Warnings)
	}
}

// TestDMN15EnvErrorNamesVariable: a bad env value is reported with the
// file, the key and the variable (no line: it is not in the file).
func TestDMN15EnvErrorNamesVariable(t *testing.T) {
	t.Setenv("ENGENHO_SWEEP_INTERVAL", "often")
	_, p, err := load(t, "sweep: {interval: 5s}\n")
	if err == nil {
		t.Fatal("no error")
	}
	es := errorsOf(t, err)
	want := "config " + p + ": sweep.interval (from ENGENHO_SWEEP_INTERVAL): want a duration"
	if len(es) != 1 || !strings.HasPrefix(es[0].Error(), want) || es[0].Line != 0 {
		t.Fatalf("error %q, want prefix %q", err, want)
	}
}

// TestValidationErrors: every rejected value names the file, the line and
// the key.
func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name, yaml, key string
		line            int
		msg             string
	}{
		{"node name", "node:\n  name: -bad/name\n", "node.name", 2, "want letters"},
		{"log level", "log:\n  level: loud\n", "log.level", 2, `got "loud"`},
		{"log format", "log:\n  format: xml\n", "log.format", 2, "want one of [auto json console]"},
		{"stack empty", "stacks:\n  - a.yaml\n  - ''\n", "stacks[1]", 3, "empty path"},
		{"stack glob", "stacks:\n  - 'x/[.yaml'\n", "stacks[0]", 2, "bad glob"},
		{"stack missing", "stacks:\n  - nope.yaml\n", "stacks[0]", 2, "does not exist"},
		{"stacks shape", "stacks:\n  a: b\n", "stacks", 2, "want a list"},
		{"group", "control:\n  group: 'a b'\n", "control.group", 2, "not a group name"},
		{"idle", "control:\n  idle_timeout: 0s\n", "control.idle_timeout", 2, "must be positive"},
		{"max request", "control:\n  max_request: 1KiB\n", "control.max_request", 2, "within 4KiB..64MiB"},
		{"max request unit", "control:\n  max_request: 1 parsec\n", "control.max_request", 2, "unknown size unit"},
		{"no driver", "drivers:\n  process:\n    enabled: false\n", "drivers.process.enabled", 3, "no driver is enabled"},
		{"bool", "drivers:\n  process:\n    enabled: maybe\n", "drivers.process.enabled", 3, "want true or false"},
		{"log files", "drivers:\n  process:\n    log_files: 0\n", "drivers.process.log_files", 3, "at least 1"},
		{"log max", "drivers:\n  process:\n    log_max_bytes: 100\n", "drivers.process.log_max_bytes", 3, "at least 4KiB"},
		{"int", "drivers:\n  process:\n    log_files: many\n", "drivers.process.log_files", 3, "want a whole number"},
		{"incus socket", "drivers:\n  incus:\n    socket: incus.sock\n", "drivers.incus.socket", 3, "absolute path"},
		{"incus remote", "drivers:\n  incus:\n    remote_url: http://x\n    client_cert: c\n    client_key: k\n", "drivers.incus.remote_url", 3, "https://"},
		{"incus cert", "drivers:\n  incus:\n    remote_url: https://x:8443\n    client_key: k\n", "drivers.incus.client_cert", 0, "required"},
		{"objstore kind", "objstore:\n  kind: ftp\n", "objstore.kind", 2, "want one of [fs s3]"},
		{"prefix", "objstore:\n  prefix: a/../b\n", "objstore.prefix", 2, "not allowed"},
		{"bucket", "objstore:\n  kind: s3\n", "objstore.s3.bucket", 0, "required when objstore.kind is s3"},
		{"endpoint", "objstore:\n  kind: s3\n  s3:\n    bucket: b\n    endpoint: ftp://x\n", "objstore.s3.endpoint", 5, "http or https"},
		{"part size", "objstore:\n  kind: s3\n  s3:\n    bucket: b\n    part_size: 1MiB\n", "objstore.s3.part_size", 5, "at least 5MiB"},
		{"keys pair", "objstore:\n  kind: s3\n  s3:\n    bucket: b\n    access_key: AK\n", "objstore.s3.secret_key", 0, "go together"},
		{"edge", "edge:\n  listen: localhost\n", "edge.listen", 2, "want HOST:PORT"},
		{"edge port", "edge:\n  listen: 'x:99999'\n", "edge.listen", 2, "within 0..65535"},
		{"same listen", "edge:\n  listen: ':80'\nmetrics:\n  listen: ':80'\n", "metrics.listen", 4, "same address"},
		{"strategy", "supervision:\n  strategy: all_for_none\n", "supervision.strategy", 2, "want one of"},
		{"max restarts", "supervision:\n  max_restarts: -1\n", "supervision.max_restarts", 2, "negative"},
		{"period", "supervision:\n  period: 5\n", "supervision.period", 2, "want a duration with a unit"},
		{"ladder delay", "supervision:\n  ladder:\n    delays: [1s, -2s]\n", "supervision.ladder.delays[1]", 3, "must be positive"},
		{"ladder delay type", "supervision:\n  ladder:\n    delays: [1s, soon]\n", "supervision.ladder.delays", 3, "item 1: want a duration"},
		{"jitter", "supervision:\n  ladder:\n    jitter: 2\n", "supervision.ladder.jitter", 3, "within 0..1"},
		{"sweep", "sweep:\n  interval: 1ms\n", "sweep.interval", 2, "at least 100ms"},
		{"probe retries", "probe:\n  retries: 0\n", "probe.retries", 2, "at least 1"},
		{"drain", "drain:\n  budget: -1s\n", "drain.budget", 2, "must be positive"},
		{"boot", "boot:\n  step_timeout: 0s\n", "boot.step_timeout", 2, "must be positive"},
		{"events", "journal:\n  events:\n    max_count: -5\n", "journal.events.max_count", 3, "negative"},
		{"section shape", "log: debug\n", "log", 1, "want a mapping of keys (level, format)"},
		{"leaf shape", "log:\n  level: [a, b]\n", "log.level", 2, "want a single value"},
		{"duplicate", "log:\n  level: info\n  level: debug\n", "log.level", 3, "duplicate key (first set at line 2)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, p, err := load(t, tc.yaml)
			if err == nil {
				t.Fatalf("accepted:\n%s", c)
			}
			if c != nil {
				t.Fatal("a rejected file returned a config")
			}
			es := errorsOf(t, err)
			var hit *Error
			for _, e := range es {
				if e.Key == tc.key {
					hit = e
				}
			}
			if hit == nil {
				t.Fatalf("no error for key %s in:\n%v", tc.key, err)
			}
			if hit.Line != tc.line {
				t.Errorf("line %d, want %d: %v", hit.Line, tc.line, hit)
			}
			prefix := "config " + p
			if tc.line > 0 {
				prefix += fmt.Sprintf(":%d", tc.line)
			}
			prefix += ": " + tc.key + ": "
			if msg := hit.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q, want prefix %q and %q", msg, prefix, tc.msg)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v is not ErrInvalid", err)
			}
		})
	}
}

// TestUnknownKeys: a key outside the schema is an error with its line and
// the keys that would be valid there; every problem is reported at once.
func TestUnknownKeys(t *testing.T) {
	_, p, err := load(t, `log:
  levle: debug
edgee:
  listen: ":80"
objstore:
  s3:
    secret-key: hunter2
drivers:
  process:
    Enabled: true
`)
	if !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("error %v, want ErrUnknownKey", err)
	}
	es := errorsOf(t, err)
	want := []struct {
		key  string
		line int
		hint string
	}{
		{"log.levle", 2, "(log has: level, format)"},
		{"edgee", 3, "known keys: node, data_dir, log, stacks"},
		{"objstore.s3.secret-key", 7, "secret_key"},
		{"drivers.process.Enabled", 10, "enabled, log_max_bytes, log_files"},
	}
	if len(es) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(es), len(want), err)
	}
	for i, w := range want {
		e := es[i]
		if e.Key != w.key || e.Line != w.line || !strings.Contains(e.Msg, w.hint) {
			t.Errorf("error %d = %v, want key %s line %d hint %q", i, e, w.key, w.line, w.hint)
		}
		if !strings.HasPrefix(e.Error(), fmt.Sprintf("config %s:%d: %s: unknown key", p, w.line, w.key)) {
			t.Errorf("message %q", e.Error())
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a value leaked into %q", err)
	}
}

// TestDMN16EmptyAndTruncated: an empty, blank, comment-only or null file
// is an error (a truncate can make a reader see an empty file); so is a
// file cut in the middle of a value.
func TestDMN16EmptyAndTruncated(t *testing.T) {
	cases := []struct {
		name, content string
		kind          error
	}{
		{"empty", "", ErrEmpty},
		{"blank", " \n\t\n", ErrEmpty},
		{"comments", "# all defaults?\n", ErrEmpty},
		{"null", "~\n", ErrEmpty},
		{"list", "- a\n- b\n", ErrSyntax},
		{"scalar", "hello\n", ErrSyntax},
		{"cut flow mapping", "log: {level: debug, format: js", ErrSyntax},
		{"cut quoted", "edge:\n  listen: \"127.0.0.1:80", ErrSyntax},
		{"cut indent", "objstore:\n  kind: s3\n  s3:\n    bucket: b\n   e", ErrSyntax},
		{"cut value", "objstore:\n  kind: s", ErrInvalid},
		{"two documents", "log: {level: info}\n---\nlog: {level: debug}\n", ErrSyntax},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, p, err := load(t, tc.content)
			if c != nil || err == nil {
				t.Fatalf("got a config (%v), want an error", err)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want kind %v", err, tc.kind)
			}
			if !strings.HasPrefix(err.Error(), "config "+p) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// TestDMN16EveryPrefixOfDemo: the demo config cut at every byte gives a
// clear error naming the file or a complete, valid config, never a panic
// or a half-built one.
func TestDMN16EveryPrefixOfDemo(t *testing.T) {
	src, err := os.ReadFile("../../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "stacks/demo.yaml", "name: demo\n")
	p := filepath.Join(dir, "engenho.yaml")
	for _, n := range cutPoints(src) {
		if err := os.WriteFile(p, src[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		c, d, err := Load(p)
		if d != DigestOf(src[:n]) {
			t.Fatalf("prefix %d: digest is not of the bytes read", n)
		}
		if err != nil {
			if c != nil {
				t.Fatalf("prefix %d: error and a config", n)
			}
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("prefix %d: error %q does not name the file", n, err)
			}
			continue
		}
		if c.File != p || c.DataDir == "" || c.Node.Name == "" {
			t.Fatalf("prefix %d: incomplete config:\n%s", n, c)
		}
	}
}

// cutPoints are the offsets worth cutting src at: every line start, and
// every byte of the lines' content before any comment (a cut inside a
// comment behaves like a cut where the comment starts).
func cutPoints(src []byte) []int {
	var out []int
	off := 0
	for _, line := range bytes.SplitAfter(src, []byte("\n")) {
		out = append(out, off)
		content := line
		if i := bytes.Index(line, []byte(" #")); i >= 0 {
			content = line[:i+1]
		}
		if t := bytes.TrimSpace(content); len(t) > 0 && t[0] != '#' {
			for i := 1; i < len(content); i++ {
				out = append(out, off+i)
			}
		}
		off += len(line)
	}
	return out
}

// TestSEC2SecretsRedacted: a secret never shows in String, fmt verbs,
// JSON, Redacted, or an error.
func TestSEC2SecretsRedacted(t *testing.T) {
	const secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY"
	c := mustLoad(t, "objstore:\n  kind: s3\n  s3:\n    bucket: b\n    access_key: AKID\n    secret_key: "+secret+"\n    session_token: tok-"+secret+"\n")
	if c.Objstore.S3.SecretKey.Reveal() != secret {
		t.Fatal("Reveal does not give the secret")
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	red := c.Redacted()
	redJS, _ := json.Marshal(red)
	outs := map[string]string{
		"String": c.String(), "%v": fmt.Sprintf("%v", *c), "%+v": fmt.Sprintf("%+v", *c),
		"%#v": fmt.Sprintf("%#v", *c), "%s": fmt.Sprintf("%s", c.Objstore.S3.SecretKey),
		"%x": fmt.Sprintf("%x", c.Objstore.S3.SecretKey), "json": string(js),
		"Redacted json": string(redJS), "Redacted reveal": red.Objstore.S3.SecretKey.Reveal() + red.Objstore.S3.SessionToken.Reveal(),
	}
	for name, out := range outs {
		if strings.Contains(out, secret) {
			t.Errorf("%s shows the secret: %s", name, out)
		}
	}
	if !strings.Contains(c.String(), "secret_key: '[redacted]'") {
		t.Errorf("String does not say the secret is set:\n%s", c)
	}
	if c.Objstore.S3.SecretKey.Reveal() != secret {
		t.Error("Redacted changed the original")
	}

	// In errors: a secret of the wrong shape, an invalid s3 section around
	// it, and a bad secret from the environment.
	for _, content := range []string{
		"objstore:\n  kind: s3\n  s3:\n    secret_key: [" + secret + "]\n",
		"objstore:\n  kind: s3\n  s3:\n    endpoint: 'http://AKID:" + secret + "@host'\n    bucket: b\n    secret_key: " + secret + "\n",
		"objstore:\n  kind: s3\n  s3:\n    secret_key: !!binary " + secret + "\n",
		"objstore:\n  kind: s3\n  s3:\n    secret_key: \"" + secret,
	} {
		_, _, err := load(t, content)
		if err == nil {
			t.Fatalf("accepted %q", content)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:8]) {
			t.Errorf("error shows the secret: %v", err)
		}
	}
}

// TestDMN1RelativePaths: relative paths are relative to the config file's
// directory, not the working directory; --data-dir is relative to the
// working directory, and moves the default object store with it.
func TestDMN1RelativePaths(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "stacks/web.yaml", "name: web\n")
	p := writeFile(t, dir, "etc/engenho.yaml", `
data_dir: ../var/data
stacks: [../stacks/*.yaml]
drivers:
  incus: {remote_url: "https://x:8443", client_cert: certs/c.pem, client_key: /abs/k.pem}
`)
	t.Chdir(t.TempDir())
	c, _, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "var/data"); c.DataDir != want {
		t.Errorf("data_dir = %s, want %s", c.DataDir, want)
	}
	if want := filepath.Join(dir, "var/data/objstore"); c.Objstore.FS.Dir != want {
		t.Errorf("objstore.fs.dir = %s, want %s", c.Objstore.FS.Dir, want)
	}
	if want := []string{filepath.Join(dir, "stacks/web.yaml")}; !reflect.DeepEqual(c.StackFiles, want) {
		t.Errorf("stack files %v, want %v", c.StackFiles, want)
	}
	if c.Drivers.Incus.ClientCert != filepath.Join(dir, "etc/certs/c.pem") || c.Drivers.Incus.ClientKey != "/abs/k.pem" {
		t.Errorf("incus files: %+v", c.Drivers.Incus)
	}
	cwd, _ := os.Getwd()
	c, _, err = LoadWith(p, Overrides{DataDir: "flag-data"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cwd, "flag-data"); c.DataDir != want || c.Objstore.FS.Dir != filepath.Join(want, "objstore") {
		t.Errorf("--data-dir: data_dir %s, fs.dir %s, want under %s", c.DataDir, c.Objstore.FS.Dir, want)
	}
}

// TestResolveStacks: globs expand sorted and deduplicated, skipping
// directories and editor leftovers; a listed file must exist.
func TestResolveStacks(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"stacks.d/b.yaml", "stacks.d/a.yaml", "stacks.d/.a.yaml.swp", "stacks.d/c.yaml~", "stacks.d/notes.txt", "extra/z.yaml", "extra/sub/y.yaml"} {
		writeFile(t, dir, f, "name: x\n")
	}
	if err := os.Mkdir(filepath.Join(dir, "stacks.d/dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, dir, "engenho.yaml", "stacks: ['stacks.d/*.yaml', stacks.d/a.yaml, 'extra/*/*.yaml', extra/z.yaml, 'none/*.yaml']\n")
	c, _, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(dir, "extra/sub/y.yaml"), filepath.Join(dir, "extra/z.yaml"),
		filepath.Join(dir, "stacks.d/a.yaml"), filepath.Join(dir, "stacks.d/b.yaml"),
	}
	if !reflect.DeepEqual(c.StackFiles, want) {
		t.Fatalf("stack files\n%v, want\n%v", c.StackFiles, want)
	}
	writeFile(t, dir, "stacks.d/0.yaml", "name: zero\n")
	now, err := ResolveStacks(c)
	if err != nil {
		t.Fatal(err)
	}
	added, removed := StackDiff(c.StackFiles, now)
	if !reflect.DeepEqual(added, []string{filepath.Join(dir, "stacks.d/0.yaml")}) || removed != nil {
		t.Errorf("after adding a file: added %v removed %v", added, removed)
	}
	if err := os.Remove(filepath.Join(dir, "extra/z.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveStacks(c); err == nil || !strings.Contains(err.Error(), "stacks[3]") || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("listed file removed: error %v, want stacks[3] does not exist", err)
	}
	_, _, err = load(t, "stacks: [/]\n")
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory listed: %v", err)
	}
}

// TestDMN16Diff: in-place keys, runtime-restart keys and relaunch keys are
// told apart; stack files added and removed are named.
func TestDMN16Diff(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", "name: a\n")
	writeFile(t, dir, "b.yaml", "name: b\n")
	writeFile(t, dir, "c.yaml", "name: c\n")
	p := filepath.Join(dir, "engenho.yaml")
	loadText := func(text string) *Config {
		t.Helper()
		writeFile(t, dir, "engenho.yaml", text)
		c, _, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := loadText("stacks: [a.yaml, b.yaml]\n")
	if ch := Diff(old, old.Redacted()); !ch.Empty() {
		t.Fatalf("a config differs from itself: %s", ch)
	}
	newC := loadText(`
stacks: [b.yaml, c.yaml]
log: {level: debug, format: json}
sweep: {interval: 5s}
probe: {interval: 10s}
drain: {budget: 30s}
data_dir: /srv/engenho
control: {group: ops}
edge: {listen: ":8088"}
metrics: {listen: ":9477"}
drivers: {incus: {enabled: true}}
objstore: {prefix: other}
supervision: {max_restarts: 5}
`)
	ch := Diff(old, newC)
	// objstore.fs.dir follows data_dir (default DATA_DIR/objstore) and is
	// a key of its own.
	want := Changes{
		InPlace:       []string{"log.level", "stacks", "sweep.interval", "probe.interval", "drain.budget"},
		Restart:       []string{"drivers.incus.enabled", "objstore.prefix", "objstore.fs.dir", "edge.listen", "supervision.max_restarts"},
		Relaunch:      []string{"data_dir", "log.format", "control.group", "metrics.listen"},
		StacksAdded:   []string{filepath.Join(dir, "c.yaml")},
		StacksRemoved: []string{filepath.Join(dir, "a.yaml")},
	}
	if !reflect.DeepEqual(ch, want) {
		t.Fatalf("diff\n%+v\nwant\n%+v", ch, want)
	}
	if got := ch.NeedRestart(); !reflect.DeepEqual(got, append(append([]string(nil), want.Restart...), want.Relaunch...)) {
		t.Errorf("NeedRestart = %v", got)
	}
	if s := ch.String(); !strings.Contains(s, "restart needed: drivers.incus.enabled, objstore.prefix, objstore.fs.dir, edge.listen") {
		t.Errorf("String = %q", s)
	}

	// A glob that now matches one more file changes the stack set while
	// the patterns stay the same.
	g1 := loadText("stacks: ['*.yaml']\n")
	writeFile(t, dir, "d.yaml", "name: d\n")
	g2 := loadText("stacks: ['*.yaml']\n")
	ch = Diff(g1, g2)
	if !reflect.DeepEqual(ch.InPlace, []string{"stacks"}) || !reflect.DeepEqual(ch.StacksAdded, []string{filepath.Join(dir, "d.yaml")}) || len(ch.NeedRestart()) != 0 {
		t.Errorf("glob diff %+v", ch)
	}
}

// TestReloadClasses pins the class of every key, so moving a key between
// classes is a visible decision.
func TestReloadClasses(t *testing.T) {
	live := map[string]bool{
		"log.level": true, "stacks": true, "sweep.interval": true, "probe.interval": true,
		"probe.timeout": true, "probe.start_interval": true, "probe.retries": true,
		"drain.budget": true, "boot.step_timeout": true,
	}
	relaunch := map[string]bool{
		"data_dir": true, "log.format": true, "control.group": true, "control.idle_timeout": true,
		"control.max_request": true, "metrics.listen": true,
	}
	for _, k := range Keys() {
		want := Restart
		switch {
		case live[k.Key]:
			want = Live
		case relaunch[k.Key]:
			want = Relaunch
		}
		if k.Reload != want {
			t.Errorf("%s reloads %s, want %s", k.Key, k.Reload, want)
		}
		if k.Env != "ENGENHO_"+strings.ToUpper(strings.ReplaceAll(k.Key, ".", "_")) {
			t.Errorf("%s env %s", k.Key, k.Env)
		}
	}
}

// TestDocsListEveryKey: docs/config.md documents every key and its
// environment variable.
func TestDocsListEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		if !strings.Contains(string(doc), "`"+k.Key+"`") || !strings.Contains(string(doc), k.Env) {
			t.Errorf("docs/config.md does not list %s (%s)", k.Key, k.Env)
		}
	}
}

// TestDMN16Digest: the digest is of the bytes read, returned even when the
// file is rejected, and Changed tells whether the file moved on since.
func TestDMN16Digest(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "engenho.yaml", "")
	_, d, err := Load(p)
	if !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty file: %v", err)
	}
	if d != Digest(sha256.Sum256(nil)) {
		t.Fatalf("digest %s is not of the empty file", d)
	}
	if changed, err := Changed(p, d); err != nil || changed {
		t.Fatalf("Changed before any write = %v, %v", changed, err)
	}
	// The writer finishes after the failed read: the boot retries once.
	writeFile(t, dir, "engenho.yaml", "log: {level: debug}\n")
	if changed, err := Changed(p, d); err != nil || !changed {
		t.Fatalf("Changed after a write = %v, %v", changed, err)
	}
	c, d2, err := Load(p)
	if err != nil || c.Log.Level != "debug" || d2 == d {
		t.Fatalf("reload: %v %v", c, err)
	}
	if d2.String() != fmt.Sprintf("%x", sha256.Sum256([]byte("log: {level: debug}\n"))) {
		t.Errorf("digest hex %s", d2)
	}
	os.Remove(p)
	if _, err := Changed(p, d2); !errors.Is(err, ErrRead) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Changed on a missing file: %v", err)
	}
	if _, _, err := Load(p); !errors.Is(err, ErrRead) || !strings.HasPrefix(err.Error(), "config "+p+": cannot read") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

// TestShippedConfigs: configs/demo.yaml (what `make run` uses) and the
// commented production example load, and the demo runs without root.
func TestShippedConfigs(t *testing.T) {
	demo, _, err := Load("../../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("../..")
	checks := map[string][2]any{
		"data_dir":       {demo.DataDir, filepath.Join(root, "configs/demo-data")},
		"objstore.fs":    {demo.Objstore.FS.Dir, filepath.Join(root, "configs/demo-data/objstore")},
		"stacks":         {demo.StackFiles, []string{filepath.Join(root, "configs/stacks/demo.yaml"), filepath.Join(root, "configs/stacks/hibernate-demo.yaml")}},
		"edge.listen":    {demo.Edge.Listen, "127.0.0.1:8088"},
		"metrics.listen": {demo.Metrics.Listen, "127.0.0.1:9477"},
		"log.level":      {demo.Log.Level, "info"},
		"objstore.kind":  {demo.Objstore.Kind, "fs"},
	}
	for k, v := range checks {
		if !reflect.DeepEqual(v[0], v[1]) {
			t.Errorf("demo %s = %v, want %v", k, v[0], v[1])
		}
	}
	prod, _, err := Load("../../configs/engenho.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if prod.DataDir != "/var/lib/engenho" || prod.Stacks[0] != "/etc/engenho/stacks.d/*.yaml" {
		t.Errorf("production example: %s", prod)
	}
}

// TestStringRoundTrip: the effective-config dump loads back to the same
// config.
func TestStringRoundTrip(t *testing.T) {
	c := mustLoad(t, `
node: {name: n1}
control: {group: "0755", max_request: 5000}
objstore: {kind: s3, s3: {bucket: "yes", endpoint: "http://h:9000"}}
drivers: {incus: {profiles: []}}
supervision: {ladder: {jitter: 0.5, delays: [90s, 1h30m]}}
`)
	again, err := parse(c.File, []byte(c.String()), Overrides{})
	if err != nil {
		t.Fatalf("%v\n%s", err, c)
	}
	if ch := Diff(c, again); !ch.Empty() || again.File != c.File || !reflect.DeepEqual(again.StackFiles, c.StackFiles) {
		t.Fatalf("round trip differs:\n%s\n%s", c, again)
	}
	if c.Objstore.S3.Bucket != "yes" || c.Control.Group != "0755" {
		t.Errorf("quoted scalars: bucket %q group %q", c.Objstore.S3.Bucket, c.Control.Group)
	}
}

func TestSize(t *testing.T) {
	good := map[string]Size{"0": 0, "1048576": MiB, "10MiB": 10 * MiB, "4 KiB": 4 * KiB, "2gib": 2 * GiB, "5MB": 5_000_000, "512k": 512_000, "7B": 7}
	for s, want := range good {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "MiB", "-1", "1.5MiB", "10 parsecs", "99999999999999999999"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
	for s, want := range map[Size]string{0: "0", 1000: "1000", KiB: "1KiB", 3 * MiB: "3MiB", GiB: "1GiB", 1536: "1536", MiB + KiB: "1025KiB"} {
		if s.String() != want {
			t.Errorf("Size(%d).String() = %s, want %s", int64(s), s.String(), want)
		}
	}
}

func TestDrainBudgetWarning(t *testing.T) {
	c := mustLoad(t, "drain: {budget: 2m}\n")
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "TimeoutStopSec") {
		t.Errorf("warnings %q", c.Warnings)
	}
}

// TestNullMeansDefault: a key or section written with no value keeps its
// default.
func TestNullMeansDefault(t *testing.T) {
	c := mustLoad(t, "log: {level: }\nstacks:\ndrivers: {incus: {profiles: }}\nedge:\nsweep: ~\n")
	if c.Log.Level != "info" || len(c.Stacks) != 0 || !reflect.DeepEqual(c.Drivers.Incus.Profiles, []string{"default"}) || c.Sweep.Interval != 10*time.Second {
		t.Errorf("null values: %s", c)
	}
	// An explicit empty list is not a null: no profiles at all.
	c = mustLoad(t, "drivers: {incus: {profiles: []}}\n")
	if c.Drivers.Incus.Profiles == nil || len(c.Drivers.Incus.Profiles) != 0 {
		t.Errorf("profiles: [] gave %#v", c.Drivers.Incus.Profiles)
	}
}

// ladderOf is l as the ladder package reads it (the daemon's conversion).
func ladderOf(l Ladder) ladder.Config {
	return ladder.Config{Immediate: l.Immediate, Delays: l.Delays, Cap: l.Cap, Jitter: l.Jitter, Stable: l.Stable}
}

// CHS-2: fault injection exists only in the chaos build. Elsewhere
// chaos.enabled: true is a config error that says so, with its line (or
// its variable); the chaos build accepts it.
func TestChaosEnabledNeedsTheChaosBuild(t *testing.T) {
	_, p, err := load(t, "log: {level: info}\nchaos:\n  enabled: true\n")
	es := errorsOf(t, err)
	if len(es) != 1 || es[0].Key != "chaos.enabled" || es[0].Line != 3 || !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "built without -tags chaos") {
		t.Fatalf("error %v", err)
	}
	c, _, err := LoadWith(p, Overrides{ChaosBuild: true})
	if err != nil || !c.Chaos.Enabled {
		t.Fatalf("the chaos build: %v %v", c, err)
	}
	if c := mustLoad(t, "chaos: {enabled: false}\n"); c.Chaos.Enabled {
		t.Fatal("chaos.enabled: false enabled chaos")
	}
	t.Setenv("ENGENHO_CHAOS_ENABLED", "true")
	_, p, err = load(t, "log: {level: info}\n")
	if es := errorsOf(t, err); len(es) != 1 || es[0].Env != "ENGENHO_CHAOS_ENABLED" || !strings.Contains(err.Error(), "built without -tags chaos") {
		t.Fatalf("from the environment: %v", err)
	}
	if _, _, err := LoadWith(p, Overrides{ChaosBuild: true}); err != nil {
		t.Fatalf("the chaos build, from the environment: %v", err)
	}
}
