package daemon_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// DMN-15, DMN-7: a daemon started on a config with several mistakes holds
// its boot failed in the data directory the file names (not the default
// one), and its log and `engenho status` there list every mistake with
// its line and key; fixing the file boots it.
func TestDMN15BadConfigEveryErrorAtStart(t *testing.T) {
	n := newNode(t)
	bad := `data_dir: data
log: {level: loud}
sweep: {interval: 99999999999h}
probe: {timeout: 1e400s}
stacks: [nope.yaml]
bogus: 1
`
	if err := os.WriteFile(n.config, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	n.start("failed")
	want := []string{
		"engenho.yaml:2: log.level: want trace, debug, info, warn or error, got \"loud\"",
		"engenho.yaml:3: sweep.interval: \"99999999999h\" is too long: at most 87600h (10 years)",
		"engenho.yaml:4: probe.timeout: want a duration with a unit such as 90s, 5m or 1h30m, got \"1e400s\": write it without an exponent",
		"engenho.yaml:5: stacks[0]: stack file " + n.dir + "/nope.yaml does not exist",
		"engenho.yaml:6: bogus: unknown key",
	}
	out, _ := n.cli("status")
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("status does not show %q:\n%s", w, out)
		}
	}
	n.writeConfig()
	n.waitState("running")
	n.stop() // the log is read once the process is done writing it
	for _, w := range want {
		if !strings.Contains(n.log.String(), strings.ReplaceAll(w, `"`, `\"`)) {
			t.Errorf("the daemon's log does not show %q", w)
		}
	}
}

// SVC-1, SVC-2: `engenho apply` of several files answers with every
// problem of every file at once, parsing and validation alike (a typo, a
// missing driver, a port in use, two files publishing one port), names
// each file and line, exits non-zero, and applies none of them, not even
// the good one.
func TestSVC1ApplyEveryErrorAtOnce(t *testing.T) {
	n := newNode(t)
	n.start("running")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	free := freePort(t)
	typo := n.writeFile("typo.yaml", `name: typo
services:
  a:
    command: ["/bin/sleep", "100"]
    comand: oops
  b:
    command: ["/bin/sleep", "100"]
    driver: nosuch
`)
	busyFile := n.writeFile("busy.yaml", fmt.Sprintf(`name: busy
services:
  web:
    command: ["/bin/sleep", "100"]
    ports: ["127.0.0.1:%d:80"]
`, busyPort))
	left := n.writeFile("left.yaml", fmt.Sprintf("name: left\nservices:\n  x:\n    command: [\"/bin/sleep\", \"100\"]\n    ports: [\"127.0.0.1:%d:80\"]\n", free))
	right := n.writeFile("right.yaml", fmt.Sprintf("name: right\nservices:\n  y:\n    command: [\"/bin/sleep\", \"100\"]\n    ports: [\"127.0.0.1:%d:80\"]\n", free))
	out, code := n.cli("apply", typo, busyFile, left, right)
	if code == 0 {
		t.Fatalf("apply accepted:\n%s", out)
	}
	for _, w := range []string{
		typo + ":5: services.a.comand: unknown key",
		typo + ":8: services.b.driver: driver \"nosuch\" is not available on this node",
		busyFile + fmt.Sprintf(":5: services.web.ports[0]: port %d is in use on this node", busyPort),
		right + fmt.Sprintf(":5: services.y.ports[0]: port %d is also published by stack left service x (%s)", free, left),
	} {
		if !strings.Contains(out, w) {
			t.Errorf("apply output lacks %q:\n%s", w, out)
		}
	}
	// Nothing was recorded: the plan of each good file is still a create
	// (the deployer records synchronously before it answers, SVC-5).
	for _, f := range []string{left, right} {
		if plan := n.mustCLI("apply", "--dry-run", f); !strings.Contains(plan, "create") {
			t.Errorf("%s was applied by a refused request:\n%s", f, plan)
		}
	}
	n.mustCLI("apply", left)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
