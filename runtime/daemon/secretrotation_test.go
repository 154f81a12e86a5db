package daemon_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

// Compose secrets that rotate (issue 15): a `file:` secret reaches the
// workload as $ENGENHO_SECRETS_DIR/TARGET. Editing the file is noticed
// without an apply: one secret.rotated event per service names the stack,
// service and secret (never the value); on_change restart (the default)
// rolls the service to a new revision whose instance reads the new value;
// on_change none keeps the revision and the running instance, and status
// lists the secret as stale until the instance is replaced (here by
// `engenho redeploy`), which then reads the new value. No value shows in
// the CLI's output, the daemon's log or the data directory.
func TestSecretRotation(t *testing.T) {
	n := newNode(t)
	first, second := "f1rst-"+randomHex(t, 12), "s3c0nd-"+randomHex(t, 12)
	secretFile := filepath.Join(n.dir, "db_password.txt")
	writeAtomically(t, secretFile, first)
	proof := filepath.Join(n.dir, "proof")
	file := n.writeFile("vault.yaml", fmt.Sprintf(`name: vault
secrets:
  db_password:
    file: ./db_password.txt
services:
  app:
    command: ["/bin/sh", "-c", "sha256sum < $$ENGENHO_SECRETS_DIR/db > %[1]s-app.$$$$; mv %[1]s-app.$$$$ %[1]s-app; exec sleep 100000"]
    secrets:
      - source: db_password
        target: db
    stop_grace_period: 1s
  cache:
    command: ["/bin/sh", "-c", "sha256sum < $$ENGENHO_SECRETS_DIR/db_password > %[1]s-cache.$$$$; mv %[1]s-cache.$$$$ %[1]s-cache; exec sleep 100000"]
    secrets: [db_password]
    stop_grace_period: 1s
    x-engenho:
      secrets: {on_change: none}
`, proof))
	n.start("running")
	var shown strings.Builder
	shown.WriteString(n.mustCLI("apply", file))
	for _, svc := range []string{"app", "cache"} {
		n.eventually("vault/"+svc+" converged", 60*time.Second, func() bool { return converged(n.service("vault", svc)) })
		n.eventually(svc+" read the first value", 30*time.Second, func() bool { return proofIs(proof+"-"+svc, sha256Hex(first)) })
	}
	app, cache := n.service("vault", "app"), n.service("vault", "cache")

	writeAtomically(t, secretFile, second)
	n.eventually("secret.rotated for app and cache", 30*time.Second, func() bool {
		evs := rotatedEvents(t, n)
		return len(evs) == 2
	})
	for _, ev := range rotatedEvents(t, n) {
		want := map[string]string{"app": "restart", "cache": "none"}[ev.Service]
		if ev.Stack != "vault" || ev.Fields["secret"] != "db_password" || ev.Fields["on_change"] != want {
			t.Errorf("secret.rotated event: %+v", ev)
		}
	}
	// restart: a new revision, a new instance, the new value.
	n.eventually("app rolled to a new revision with the new value", 60*time.Second, func() bool {
		s := n.service("vault", "app")
		return s.Revision != app.Revision && converged(s) && proofIs(proof+"-app", sha256Hex(second))
	})
	if got := n.service("vault", "app"); fmt.Sprint(instances(got)) == fmt.Sprint(instances(app)) {
		t.Errorf("app's instance was not replaced: %v", instances(got))
	}
	// none: same revision and instance, old value, a stale secret.
	c := n.service("vault", "cache")
	if c.Revision != cache.Revision || fmt.Sprint(instances(c)) != fmt.Sprint(instances(cache)) {
		t.Errorf("on_change none replaced cache: %s -> %s, %v -> %v", cache.Revision, c.Revision, instances(cache), instances(c))
	}
	if !slices.Equal(c.StaleSecrets, []string{"db_password"}) || !proofIs(proof+"-cache", sha256Hex(first)) {
		t.Errorf("cache: stale secrets %v; it must keep the old value until replaced", c.StaleSecrets)
	}
	status := n.mustCLI("status")
	shown.WriteString(status)
	if !strings.Contains(status, "stale secrets: db_password") {
		t.Errorf("status does not list cache's stale secret:\n%s", status)
	}
	shown.WriteString(n.mustCLI("redeploy", "vault/cache"))
	n.eventually("cache replaced with the new value and nothing stale", 60*time.Second, func() bool {
		s := n.service("vault", "cache")
		return converged(s) && len(s.StaleSecrets) == 0 && proofIs(proof+"-cache", sha256Hex(second))
	})

	for _, args := range [][]string{{"status", "--json"}, {"events"}, {"--json", "events"}, {"why", "vault/app"}} {
		out, _ := n.cli(args...)
		shown.WriteString(out)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
	for _, v := range []string{first, second} {
		if strings.Contains(shown.String(), v) || strings.Contains(n.log.String(), v) {
			t.Errorf("a secret value shows in the CLI's output or the daemon's log")
		}
	}
	grepDataDir(t, n.data(), true, first, second)
}

func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func rotatedEvents(t *testing.T, n *node) []messages.Event {
	t.Helper()
	out, code := n.cli("--json", "events")
	if code != 0 {
		return nil
	}
	var evs []messages.Event
	for _, line := range strings.Split(out, "\n") {
		var ev messages.Event
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == messages.KindSecretRotated {
			evs = append(evs, ev)
		}
	}
	return evs
}
