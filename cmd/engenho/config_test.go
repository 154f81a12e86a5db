package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/control/controltest"
)

func writeStack(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const configStack = `services:
  web:
    image: "alpine:${TAG}"
    command: [httpd, -p, "${PORT:-80}"]
    environment:
      FROM_SHELL:
      NOT_SET:
      PW: {value: hunter2-secret, secret: true}
    deploy:
      replicas: ${REPLICAS:-2}
`

// engenho config works without a daemon: it interpolates from its own
// environment and the .env beside the file, prints the normalized stack
// with secrets redacted, and its warnings on stderr.
func TestConfigOffline(t *testing.T) {
	dir := t.TempDir()
	writeStack(t, dir, ".env", "TAG=3.19\nREPLICAS=5\n")
	file := writeStack(t, dir, "web.yaml", configStack)
	t.Setenv("FROM_SHELL", "shell-value")
	t.Setenv("REPLICAS", "3") // the command's environment wins over .env
	out, errs, code := cli(t, "", "", "config", file)
	if code != 0 {
		t.Fatalf("config: %d\n%s", code, errs)
	}
	for _, want := range []string{"image: alpine:3.19", "- \"80\"", "FROM_SHELL: shell-value", "PW: " + stackfile.Redaction, "replicas: 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errs, "hunter2") || strings.Contains(out, "NOT_SET") {
		t.Errorf("a secret shows, or an unset variable was set:\n%s\n%s", out, errs)
	}
	if !strings.Contains(errs, "warning: "+file+":7: services.web.environment.NOT_SET: NOT_SET has no value here") {
		t.Errorf("stderr lacks the unset variable's warning:\n%s", errs)
	}
	jsonOut, _, code := cli(t, "", "", "config", "--json", file)
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(jsonOut), &v) != nil || v["name"] != "web" {
		t.Errorf("--json: %d %s", code, jsonOut)
	}
}

// A bad file: every problem on stderr with file:line, nothing on stdout,
// exit status 1; the good file of the same call is not printed either.
func TestConfigRefusesEveryProblem(t *testing.T) {
	dir := t.TempDir()
	good := writeStack(t, dir, "good.yaml", "services:\n  a:\n    command: [run]\n")
	bad := writeStack(t, dir, "bad.yaml", "services:\n  a:\n    command: [run]\n    deploy: {replicas: \"${N:?say how many}\"}\n    bogus: 1\n")
	out, errs, code := cli(t, "", "", "config", good, bad)
	if code != 1 || out != "" {
		t.Fatalf("config: %d\nstdout: %s", code, out)
	}
	for _, want := range []string{
		"error: " + bad + ":4: services.a.deploy.replicas: required variable N is not set: say how many",
		"error: " + bad + ":5: services.a.bogus: unknown key",
		"1 of 2 stack files refused",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

// apply sends each file's directory, the command's environment and the
// profiles, and prints the warnings the daemon returns.
func TestApplySendsEnvironmentAndDir(t *testing.T) {
	f := &controltest.Fake{ApplyResult: control.ApplyResult{DryRun: true, Stacks: []control.StackPlan{{Stack: "web",
		Changes:  []stackfile.Change{{Service: "api", Action: stackfile.ActionCreate, ToRevision: "cccccccccccc", ToReplicas: 1}},
		Warnings: []string{"web.yaml:3: services.api.environment.X: X has no value here"}}}}}
	sock := daemonFake(t, f)
	dir := t.TempDir()
	file := writeStack(t, dir, "web.yaml", "services:\n  api:\n    command: [sleep, inf]\n")
	t.Setenv("ENGENHO_TEST_APPLY_VAR", "v1")
	out, errs, code := cli(t, sock, "", "apply", file, "--dry-run", "--profile", "debug", "--profile", "ops")
	if code != 0 {
		t.Fatalf("apply: %d %s", code, errs)
	}
	sent := f.Calls()[0].Args.(control.ApplyArgs)
	if sent.Files[0].Dir != dir || sent.Env["ENGENHO_TEST_APPLY_VAR"] != "v1" || strings.Join(sent.Profiles, ",") != "debug,ops" {
		t.Errorf("apply sent dir %q env var %q profiles %v", sent.Files[0].Dir, sent.Env["ENGENHO_TEST_APPLY_VAR"], sent.Profiles)
	}
	if !strings.Contains(out, "warning: web.yaml:3: services.api.environment.X: X has no value here\n") {
		t.Errorf("the warning is not printed:\n%s", out)
	}
}

// --profile activates Compose profiles: a service with profiles is in the
// stack only when one of them is active.
func TestConfigProfiles(t *testing.T) {
	file := writeStack(t, t.TempDir(), "p.yaml", "services:\n  app:\n    command: [run]\n  debug:\n    command: [sh]\n    profiles: [debug]\n")
	out, errs, code := cli(t, "", "", "config", file)
	if code != 0 || strings.Contains(out, "debug:") {
		t.Errorf("without --profile: %d %s\n%s", code, errs, out)
	}
	out, errs, code = cli(t, "", "", "config", "--profile", "debug", file)
	if code != 0 || !strings.Contains(out, "debug:") {
		t.Errorf("with --profile debug: %d %s\n%s", code, errs, out)
	}
}

// A volume the process driver cannot mount on this machine (its target or
// bind source is missing) is a warning in config, which judges the file;
// apply, on the node, refuses it.
func TestConfigWarnsOfMountsTheProcessDriverCannotMake(t *testing.T) {
	dir := t.TempDir()
	file := writeStack(t, dir, "v.yaml", `services:
  app:
    command: [run]
    volumes:
      - data:`+dir+`
      - /nonexistent-engenho-target:/nonexistent-engenho-target-2
volumes:
  data:
`)
	_, errs, code := cli(t, "", "", "config", file)
	if code != 0 {
		t.Fatalf("config: %d\n%s", code, errs)
	}
	for _, want := range []string{
		file + ":6: services.app.volumes[1]: target /nonexistent-engenho-target-2 does not exist on this machine",
		"bind source /nonexistent-engenho-target does not exist",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "volumes[0]") {
		t.Errorf("a mount that can be made was warned about:\n%s", errs)
	}
}
