package process_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/process"
	"github.com/engenho/engenho/runtime/nodekey"
)

const secretValue = "pa55-w0rd-of-a-workload"

func sealedDriver(t *testing.T, dir string, sealer drivers.Sealer) *process.Driver {
	t.Helper()
	d, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot, Logger: zerolog.Nop(), Sealer: sealer})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

func testSealer(t *testing.T, b byte) drivers.Sealer {
	k, err := nodekey.New(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// SEC-2: the values of a spec's SecretEnv reach the workload and its exec
// probes, but its state file holds them only sealed; a driver opened
// again on the directory (a daemon restart) adopts the run and starts the
// next one with the values. A driver with another key still adopts and
// stops the run, but refuses to start it without its values; one without a
// sealer refuses a spec with secrets.
func TestSecretEnvSealedSEC2(t *testing.T) {
	dir := t.TempDir()
	key := testSealer(t, 1)
	a := sealedDriver(t, dir, key)
	sum := sha256.Sum256([]byte(secretValue))
	ok := hex.EncodeToString(sum[:]) // what the workload prints: the value's hash
	spec := shSpec("vault", `printf %s "$PW" | sha256sum; sleep 3600`, nil)
	spec.Env = map[string]string{"PW": secretValue, "PLAIN": "shown"}
	spec.SecretEnv = []string{"PW"}
	mustCreate(t, a, spec)
	first := mustStart(t, a, "vault")
	waitFor(t, "the workload to see its secret", func() bool { return strings.Contains(readLogs(t, a, "vault"), ok) })
	if res, err := a.Exec(ctxT(t), "vault", []string{"sh", "-c", `printf %s "$PW" | sha256sum`}); err != nil || !strings.Contains(string(res.Stdout), ok) {
		t.Fatalf("exec probe without the secret: %+v %v", res, err)
	}
	state := filepath.Join(dir, "instances", "vault", "state.json")
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(secretValue)) || !bytes.Contains(b, []byte(`"sealed_env":{"PW":"v1:`)) || !bytes.Contains(b, []byte("shown")) {
		t.Fatalf("state file: %s", b)
	}
	a.Close()

	// A restart: adopted, and the next run has the value.
	b2 := sealedDriver(t, dir, key)
	if st, err := b2.Inspect(ctxT(t), "vault"); err != nil || st.Pid != first.Pid {
		t.Fatalf("not adopted: %+v %v", st, err)
	}
	exit := watchExit(t, b2, "vault")
	unix.Kill(first.Pid, unix.SIGKILL)
	recvExit(t, exit, "vault")
	os.Truncate(filepath.Join(dir, "instances", "vault", "output.log"), 0)
	mustStart(t, b2, "vault")
	waitForOr(t, "the restarted workload to see its secret", func() bool { return strings.Contains(readLogs(t, b2, "vault"), ok) }, func() string {
		st, err := b2.Inspect(ctxT(t), "vault")
		return fmt.Sprintf("status %+v %v; logs %q", st, err, readLogs(t, b2, "vault"))
	})
	if b, _ := os.ReadFile(state); bytes.Contains(b, []byte(secretValue)) {
		t.Fatalf("state file after a restart: %s", b)
	}
	b2.Close()

	// Another key (a lost node key): adopted, stoppable, not startable.
	c := sealedDriver(t, dir, testSealer(t, 2))
	defer c.Close()
	if st, err := c.Inspect(ctxT(t), "vault"); err != nil || st.State != drivers.StateRunning {
		t.Fatalf("not adopted with another key: %+v %v", st, err)
	}
	if err := c.Kill(ctxT(t), "vault"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run to end", func() bool { st, _ := c.Inspect(ctxT(t), "vault"); return st.State == drivers.StateStopped })
	if err := c.Start(ctxT(t), "vault"); !errors.Is(err, drivers.ErrInvalid) || strings.Contains(err.Error(), secretValue) {
		t.Fatalf("started without its secret values: %v", err)
	}
	if err := c.Delete(ctxT(t), "vault"); err != nil {
		t.Fatalf("delete: %v", err)
	}

	// No sealer: a spec with secrets is refused, nothing is written.
	d := newDriver(t, t.TempDir())
	defer d.Close()
	spec.Name = "nosealer"
	if err := d.Create(ctxT(t), spec); !errors.Is(err, drivers.ErrInvalid) {
		t.Fatalf("Create without a sealer: %v", err)
	}
	bad := spec
	bad.Name, bad.SecretEnv = "badkeys", []string{"MISSING"}
	if err := a.Validate(ctxT(t), bad); !errors.Is(err, drivers.ErrInvalid) {
		t.Fatalf("a secret key not in env: %v", err)
	}
}
