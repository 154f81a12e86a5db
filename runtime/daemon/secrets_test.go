package daemon_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/runtime/journal"
)

// SEC-2: a secret env value reaches the workload (its service and its
// sidecar, its exec probe) in plaintext and nowhere else: not in any file
// of the data directory (the journal's value log, tables and manifest, the
// process driver's state files, logs, markers), not in status, events,
// `why`, logs, the apply plan or its dry run, nor in the daemon's own log.
// It is kept sealed under the node key (DATA/node.key, 0600), and adoption
// works across a SIGKILL of the daemon: the revision is bound to the node
// key, not to the random nonce, so the running instance is adopted, not
// replaced, and a restart after that still gets the value.
func TestSEC2SecretsAtRest(t *testing.T) {
	secret := "s3cr3t-" + randomHex(t, 12)
	token := "t0k3n-" + randomHex(t, 12)
	n := newNode(t)
	proof := filepath.Join(n.dir, "proof")
	stack := func(pw string) string {
		return fmt.Sprintf(`name: vault
services:
  app:
    command: ["/bin/sh", "-c", "printf %%s \"$$DB_PASSWORD/$$API_TOKEN\" | sha256sum > %[1]s.$$$$; mv %[1]s.$$$$ %[1]s; exec sleep 100000"]
    env:
      DB_PASSWORD: {value: %[2]q, secret: true}
      API_TOKEN: %[3]q
      PLAIN: visible
    healthcheck:
      test: ["CMD-SHELL", "test -n \"$$DB_PASSWORD\""]
      interval: 1s
      start_interval: 200ms
    stop_grace_period: 1s
    x-engenho: {secret_env: [API_TOKEN]}
  worker:
    env:
      DB_PASSWORD: {value: %[2]q, secret: true}
    sidecars:
      - name: helper
        command: ["/bin/sh", "-c", "printf %%s \"$$DB_PASSWORD/$$API_TOKEN\" | sha256sum > %[1]s-sidecar.$$$$; mv %[1]s-sidecar.$$$$ %[1]s-sidecar; exec sleep 100000"]
        env: {API_TOKEN: {value: %[3]q, secret: true}}
        always_on: true
`, proof, pw, token)
	}
	file := n.writeFile("vault.yaml", stack(secret))
	n.start("running")

	var shown strings.Builder // everything an operator can see
	shown.WriteString(n.mustCLI("apply", "--dry-run", file))
	shown.WriteString(n.mustCLI("apply", file))
	n.eventually("vault/app converged", 60*time.Second, func() bool { return converged(n.service("vault", "app")) })
	want := sha256Hex(secret + "/" + token)
	n.eventually("the workload and its sidecar got the secrets", 30*time.Second, func() bool {
		return proofIs(proof, want) && proofIs(proof+"-sidecar", want)
	})
	before := instances(n.service("vault", "app"))
	rev := n.service("vault", "app").Revision

	// A SIGKILL of the daemon: the instance is adopted, not replaced.
	n.kill()
	n.start("running")
	n.eventually("vault/app adopted", 60*time.Second, func() bool {
		s := n.service("vault", "app")
		return converged(s) && fmt.Sprint(instances(s)) == fmt.Sprint(before)
	})
	if got := n.service("vault", "app").Revision; got != rev {
		t.Fatalf("revision changed across a daemon restart: %s -> %s", rev, got)
	}
	// The replacement run after the restart opens the sealed values.
	os.Remove(proof)
	for name := range before {
		killGroup(t, pidOf(t, n, name))
	}
	n.eventually("the restarted workload got the secrets", 60*time.Second, func() bool { return proofIs(proof, want) })
	grepDataDir(t, n.data(), false, secret, token) // with every instance's state file there

	// Rotating the secret rolls the service; the dry run names the key only.
	rotated := "r0tat3d-" + randomHex(t, 12)
	rotatedFile := n.writeFile("vault-rotated.yaml", stack(rotated))
	plan := n.mustCLI("apply", "--dry-run", rotatedFile)
	if !strings.Contains(plan, "update") || !strings.Contains(plan, "DB_PASSWORD") {
		t.Errorf("the dry run of a rotated secret does not show an update of DB_PASSWORD:\n%s", plan)
	}
	shown.WriteString(plan)
	for _, args := range [][]string{
		{"status"}, {"status", "--json"}, {"status", "vault/app", "--json"}, {"events"}, {"--json", "events"},
		{"why", "vault/app"}, {"logs", "vault/app"}, {"tree"},
	} {
		out, _ := n.cli(args...)
		shown.WriteString(out)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
	for _, s := range []string{secret, token, rotated} {
		if strings.Contains(shown.String(), s) {
			t.Errorf("a secret shows in the CLI's output:\n%s", shown.String())
		}
		if strings.Contains(n.log.String(), s) { // read once the process is done writing it
			t.Errorf("a secret shows in the daemon's log")
		}
	}
	// A clean stop flushes the journal into its tables too: grep them all.
	files := grepDataDir(t, n.data(), true, secret, token)
	if files < 10 {
		t.Fatalf("only %d files in the data directory: the grep saw too little", files)
	}
	// Badger compresses its tables (snappy): read every record back too.
	j, err := journal.Open(journal.Options{Dir: filepath.Join(n.data(), "journal")})
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	err = j.Walk("", func(r journal.Record) error {
		records++
		for _, v := range []string{secret, token} {
			if bytes.Contains(r.Value, []byte(v)) || bytes.Contains([]byte(r.Key), []byte(v)) {
				t.Errorf("journal record %s holds a secret value", r.Key)
			}
		}
		return nil
	})
	j.Close()
	if err != nil || records < 10 {
		t.Fatalf("walking the journal: %v (%d records)", err, records)
	}
	fi, err := os.Stat(filepath.Join(n.data(), "node.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node key: %v, mode %v (want 0600)", err, fi.Mode())
	}
}

// grepDataDir fails the test if any file under dir holds one of the
// values, in plaintext or base64; it returns how many files it read.
func grepDataDir(t *testing.T, dir string, all bool, values ...string) int {
	t.Helper()
	var needles [][]byte
	for _, v := range values {
		needles = append(needles, []byte(v), []byte(base64.StdEncoding.EncodeToString([]byte(v))),
			[]byte(base64.RawURLEncoding.EncodeToString([]byte(v))), []byte(hex.EncodeToString([]byte(v))))
	}
	count := 0
	kinds := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		count++
		kinds[filepath.Ext(path)] = true
		for _, nd := range needles {
			if bytes.Contains(b, nd) {
				t.Errorf("%s holds a secret value", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".vlog", ".sst", ".json", ".log"} {
		if all && !kinds[ext] {
			t.Errorf("no %s file in the data directory: the grep missed part of it (saw %v)", ext, kinds)
		}
	}
	return count
}

func proofIs(path, want string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.HasPrefix(string(b), want)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// SEC-2, REL-5: a node key that does not open the journal's secrets (the
// key file was lost and a new one made) holds the boot failed with a
// message that says what is wrong and what to do, without the secret;
// the old key put back and `engenho retry` boot it and adopt the running
// instance.
func TestSEC2LostNodeKeyHolds(t *testing.T) {
	secret := "s3cr3t-" + randomHex(t, 12)
	n := newNode(t)
	file := n.writeFile("vault.yaml", fmt.Sprintf("name: vault\nservices:\n  app:\n    command: [\"/bin/sh\", \"-c\", \"exec sleep 100000\"]\n    env: {PW: {value: %q, secret: true}}\n    stop_grace_period: 1s\n", secret))
	n.start("running")
	n.mustCLI("apply", file)
	n.eventually("vault/app converged", 60*time.Second, func() bool { return converged(n.service("vault", "app")) })
	before := instances(n.service("vault", "app"))
	n.kill()
	keyPath := filepath.Join(n.data(), "node.key")
	key, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	n.start("failed")
	out, _ := n.cli("status")
	// REL-5: a lost key holds (class corrupt), it is not retried on a timer.
	for _, w := range []string{"sealed with another node key", keyPath, "engenho reinit journal", "hold", "corrupt"} {
		if !strings.Contains(out, w) {
			t.Errorf("status lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, secret) {
		t.Error("the secret shows in status")
	}
	if err := os.WriteFile(keyPath, key, 0o600); err != nil {
		t.Fatal(err)
	}
	n.mustCLI("retry")
	n.waitState("running")
	n.eventually("vault/app adopted", 60*time.Second, func() bool {
		s := n.service("vault", "app")
		return converged(s) && fmt.Sprint(instances(s)) == fmt.Sprint(before)
	})
	n.stop()
	if strings.Contains(n.log.String(), secret) {
		t.Error("the secret shows in the daemon's log")
	}
}

// SEC-2, REL-5, DMN-14, DMN-5: with the node key lost (the daemon made a
// new one and holds, TestSEC2LostNodeKeyHolds), `engenho reinit journal`
// on the held daemon gets it running again. It keeps DATA/node.key where it
// is (the salvaged state is sealed with it) and the node identity, leaves
// the stack whose secrets only the lost key opens in the attic and says
// so, and salvages the rest: the stack without secrets is adopted without
// a restart. The secret stack applied again runs under the new key.
func TestSEC2LostNodeKeyReinitJournal(t *testing.T) {
	secret := "s3cr3t-" + randomHex(t, 12)
	n := newNode(t)
	vault := n.writeFile("vault.yaml", fmt.Sprintf("name: vault\nservices:\n  app:\n    command: [\"/bin/sh\", \"-c\", \"exec sleep 100000\"]\n    env: {PW: {value: %q, secret: true}}\n    stop_grace_period: 1s\n", secret))
	n.start("running")
	n.mustCLI("apply", vault, n.writeFile("plain.yaml", idleStack("plain", false)))
	n.eventually("vault and plain converged", 60*time.Second, func() bool {
		return converged(n.service("vault", "app")) && converged(n.service("plain", "a"))
	})
	st, _ := n.status()
	identity := st.Daemon.Node
	inst := n.service("plain", "a").Replicas[0].Instance
	pid := pidOf(t, n, inst)
	n.kill()
	keyPath := filepath.Join(n.data(), "node.key")
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	n.start("failed")
	out := n.mustCLI("reinit", "journal", "--yes")
	for _, want := range []string{"kept the node identity", "left stacks vault in the attic", "sealed with another node key"} {
		if !strings.Contains(out, want) {
			t.Errorf("reinit output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, secret) {
		t.Error("the secret shows in the reinit's output")
	}
	n.waitState("running")
	n.eventually("plain adopted", 60*time.Second, func() bool { return converged(n.service("plain", "a")) })
	if got := n.service("plain", "a").Replicas; len(got) != 1 || got[0].Instance != inst || pidOf(t, n, inst) != pid {
		t.Errorf("plain/a after reinit: %+v (was %s pid %d)", got, inst, pid)
	}
	if s := n.service("vault", "app"); s.Stack != "" {
		t.Errorf("vault/app after reinit: %+v, want it gone with the old key", s)
	}
	after, _ := n.status()
	if after.Daemon.Node != identity {
		t.Errorf("node %+v after reinit, was %+v", after.Daemon.Node, identity)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("node key after reinit: %v %v", fi, err)
	}
	if moved, _ := filepath.Glob(filepath.Join(n.data(), "attic", "*", "node.key")); len(moved) != 0 {
		t.Errorf("reinit journal moved the node key: %v", moved)
	}
	n.mustCLI("apply", vault)
	n.eventually("vault converged again", 60*time.Second, func() bool { return converged(n.service("vault", "app")) })

	// With the key that sealed them, a reinit carries the sealed values
	// over: the secret stack is salvaged and adopted, not restarted.
	running := instances(n.service("vault", "app"))
	if code := n.stop(); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
	out = n.mustCLI("reinit", "journal", "--yes")
	if strings.Contains(out, "left stacks") || !strings.Contains(out, "salvaged") {
		t.Errorf("reinit with the sealing key:\n%s", out)
	}
	n.start("running")
	n.eventually("vault adopted after the reinit", 60*time.Second, func() bool {
		s := n.service("vault", "app")
		return converged(s) && fmt.Sprint(instances(s)) == fmt.Sprint(running)
	})
	if code := n.stop(); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
	grepDataDir(t, n.data(), false, secret)
}
