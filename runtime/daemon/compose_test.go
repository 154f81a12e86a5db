package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Compose interpolation through apply (issue 15, SVC-1): the file's
// ${VAR}s and value-less environment keys take the apply command's
// environment, then the .env beside the file, never the daemon's own;
// $$ reaches the shell as $; the unset variable is a warning in apply's
// output, and an env_file beside the file is read.
func TestComposeInterpolationThroughApply(t *testing.T) {
	n := newNode(t)
	proof := filepath.Join(n.dir, "proof")
	n.writeFile(".env", "GREETING=hello-from-dotenv\nWHO=dotenv\n")
	n.writeFile("app.env", "FROM_ENV_FILE=env-file-value\n")
	file := n.writeFile("greet.yaml", fmt.Sprintf(`name: greet
services:
  app:
    command: ["/bin/sh", "-c", "echo \"${GREETING} $${WHO} $$FROM_CLI $$DAEMON_ONLY $$FROM_ENV_FILE ${NOT_SET_ANYWHERE}\" > %s.tmp; mv %s.tmp %s; exec sleep 100000"]
    env_file: app.env
    environment:
      WHO:
      FROM_CLI:
      DAEMON_ONLY:
    deploy:
      replicas: ${REPLICAS:-1}
    stop_grace_period: 1s
`, proof, proof, proof))
	t.Setenv("DAEMON_ONLY", "leaked-from-the-daemon")
	n.start("running")
	os.Unsetenv("DAEMON_ONLY") // the CLI below runs without it
	t.Setenv("FROM_CLI", "cli-value")
	t.Setenv("WHO", "cli-wins-over-dotenv")

	out := n.mustCLI("apply", file)
	if !strings.Contains(out, "warning: "+file+":4: services.app.command[2]: variable NOT_SET_ANYWHERE is not set") ||
		!strings.Contains(out, "services.app.environment.DAEMON_ONLY: DAEMON_ONLY has no value here") {
		t.Errorf("apply does not print the warnings:\n%s", out)
	}
	n.eventually("greet/app converged", 60*time.Second, func() bool { return converged(n.service("greet", "app")) })
	want := "hello-from-dotenv cli-wins-over-dotenv cli-value  env-file-value \n"
	n.eventually("the workload printed its interpolated command", 30*time.Second, func() bool {
		b, err := os.ReadFile(proof)
		return err == nil && string(b) == want
	})
	if code := n.stop(); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
}
