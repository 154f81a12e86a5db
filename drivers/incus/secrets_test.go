package incus

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/runtime/nodekey"
)

const secretValue = "s3cr3t-of-the-incus-workload"

func testSealer(t *testing.T, b byte) drivers.Sealer {
	t.Helper()
	k, err := nodekey.New(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sealedIncus is a driver on the local incusd with sealer (needIncus has
// skipped the test when there is none).
func sealedIncus(t *testing.T, sealer drivers.Sealer) *Driver {
	t.Helper()
	d, err := New(Options{PollInterval: 50 * time.Millisecond, Sealer: sealer})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// SEC-2: what the incus driver refuses about secret files, before
// anything is created: a spec without a command (no entrypoint to hold the
// command until they are there), a driver without a sealer, bad names.
func TestCheckSecrets(t *testing.T) {
	sealed := &Driver{opts: Options{Sealer: testSealer(t, 1)}}
	cmd := []string{"sh"}
	for _, c := range []struct {
		what    string
		d       *Driver
		command []string
		files   []drivers.SecretFile
		kind    error
	}{
		{"valid", sealed, cmd, []drivers.SecretFile{{Name: "db_password", Value: "x"}, {Name: "tls.key", Mode: 0o440}}, nil},
		{"no command", sealed, nil, []drivers.SecretFile{{Name: "a"}}, drivers.ErrUnsupported},
		{"no sealer", &Driver{}, cmd, []drivers.SecretFile{{Name: "a"}}, drivers.ErrUnsupported},
		{"no secrets, no sealer", &Driver{}, nil, nil, nil},
		{"slash", sealed, cmd, []drivers.SecretFile{{Name: "a/b"}}, drivers.ErrInvalid},
		{"dot-dot", sealed, cmd, []drivers.SecretFile{{Name: ".."}}, drivers.ErrInvalid},
		{"empty", sealed, cmd, []drivers.SecretFile{{Name: ""}}, drivers.ErrInvalid},
		{"the driver's marker", sealed, cmd, []drivers.SecretFile{{Name: secretsReady}}, drivers.ErrInvalid},
		{"twice", sealed, cmd, []drivers.SecretFile{{Name: "a"}, {Name: "a"}}, drivers.ErrInvalid},
		{"setuid mode", sealed, cmd, []drivers.SecretFile{{Name: "a", Mode: 0o4400}}, drivers.ErrInvalid},
		{"more than the tmpfs holds", sealed, cmd, []drivers.SecretFile{{Name: "a", Value: strings.Repeat("x", secretsMax)}, {Name: "b", Value: "y"}}, drivers.ErrInvalid},
	} {
		spec := drivers.Spec{Name: "a", Image: "b", Command: c.command, Secrets: c.files}
		err := c.d.checkSecrets(spec, func(format string, args ...any) error {
			return drivers.Errorf(DriverName, "validate", spec.Name, drivers.ErrInvalid, format, args...)
		})
		if c.kind == nil && err != nil || c.kind != nil && !errors.Is(err, c.kind) {
			t.Errorf("%s: %v, want %v", c.what, err, c.kind)
		}
	}
	if err := checkSpecFields(drivers.Spec{Name: "a", Image: "b", Labels: drivers.Labels{"engenho.secret-files": "x"}}, true); !errors.Is(err, drivers.ErrInvalid) {
		t.Errorf("a label on the driver's sealed key: %v, want ErrInvalid", err)
	}
}

// SEC-2 for Compose `secrets:`: files under /run/secrets (a tmpfs, never
// the rootfs on the host's disk), mode 0400 by default, root's, with the
// right content, there before the command's first instruction; they are
// there again after Stop+Start, also when a driver made anew (a daemon
// restart) starts the instance; the instance's config, as incusd shows
// it, holds no value.
func TestSecretFiles(t *testing.T) {
	t.Parallel()
	needIncus(t)
	sealer := testSealer(t, 7)
	d := sealedIncus(t, sealer)
	ctx := testCtx(t)
	check := `set -e
grep -q ' /run/secrets tmpfs ' /proc/mounts || { echo "no tmpfs"; exit 3; }
[ "$(cat /run/secrets/db_password)" = '` + secretValue + `' ] || { echo "content"; exit 4; }
[ "$(stat -c %a:%u:%g /run/secrets/db_password)" = 400:0:0 ] || { echo "mode $(stat -c %a:%u:%g /run/secrets/db_password)"; exit 5; }
[ "$(stat -c %a /run/secrets/api.token)" = 440 ] || { echo "mode of api.token"; exit 5; }
[ ! -e /run/secrets/` + secretsReady + ` ] || { echo "marker left"; exit 6; }
echo secrets-ok
`
	spec := shSpec(uniqueName("sec"), check+"sleep 3600", nil)
	spec.Secrets = []drivers.SecretFile{
		{Name: "db_password", Value: secretValue},
		{Name: "api.token", Value: "tok-" + secretValue, Mode: 0o440},
	}
	create(t, d, spec)
	output := func() string {
		res, xerr := d.Exec(ctx, spec.Name, []string{"cat", stateDir + "/" + outputName})
		if xerr != nil {
			t.Fatalf("Exec: %v", xerr)
		}
		return string(res.Stdout)
	}
	if err := d.Start(ctx, spec.Name); err != nil {
		t.Fatalf("Start: %v", err)
	}
	eventually(t, "the command's checks", func() bool {
		if st, _ := d.Inspect(ctx, spec.Name); st.State == drivers.StateStopped {
			t.Fatalf("the command ended (code %d): checks failed: %s", st.ExitCode, logsOf(t, d, spec.Name))
		}
		return strings.Contains(output(), "secrets-ok")
	})

	raw := instanceJSON(t, d, spec.Name)
	if strings.Contains(raw, secretValue) {
		t.Errorf("the instance's config holds a secret value: %s", raw)
	}
	if !strings.Contains(raw, sealedKey) {
		t.Errorf("the instance's config has no %s", sealedKey)
	}
	// The rootfs on the host (a dir pool here) has the mount point only.
	onDisk := "/var/lib/incus/containers/" + spec.Name + "/rootfs" + secretsDir
	if ents, err := os.ReadDir(onDisk); err != nil {
		t.Logf("not looked at the rootfs on the host: %v", err)
	} else if len(ents) > 0 {
		t.Errorf("%s on the host's disk holds %d files", onDisk, len(ents))
	}

	// Stop+Start, the second start by a driver made anew (daemon restart):
	// the tmpfs is empty again and the files come from the sealed config.
	if err := d.Stop(ctx, spec.Name, 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	waitState(t, d, spec.Name, drivers.StateStopped)
	d2 := sealedIncus(t, sealer)
	if err := d2.Start(ctx, spec.Name); err != nil {
		t.Fatalf("Start by a new driver: %v", err)
	}
	eventually(t, "the checks after a restart", func() bool {
		if st, _ := d2.Inspect(ctx, spec.Name); st.State == drivers.StateStopped {
			t.Fatalf("the command ended (code %d) after the restart: checks failed: %s", st.ExitCode, logsOf(t, d, spec.Name))
		}
		return strings.Count(output(), "secrets-ok") == 2
	})
	if out := output(); strings.Contains(out, secretValue) {
		t.Errorf("the output log holds the value: %s", out)
	}

	// A driver with another key cannot open them: Start fails, says why
	// without the value, and leaves the instance stopped.
	if err := d2.Stop(ctx, spec.Name, 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	waitState(t, d2, spec.Name, drivers.StateStopped)
	other := sealedIncus(t, testSealer(t, 8))
	err := other.Start(ctx, spec.Name)
	if err == nil || strings.Contains(err.Error(), secretValue) || !strings.Contains(err.Error(), "secret") {
		t.Errorf("Start with another key: %v, want an error about the secret files without their value", err)
	}
	waitState(t, d, spec.Name, drivers.StateStopped)
}

// instanceJSON is GET /1.0/instances/NAME as incusd answers it (what
// `incus config show` prints from).
func instanceJSON(t *testing.T, d *Driver, name string) string {
	t.Helper()
	resp, err := d.c.raw(testCtx(t), request{method: http.MethodGet, path: instancePath(name)})
	if err != nil {
		t.Fatalf("GET instance: %v", err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func logsOf(t *testing.T, d *Driver, name string) string {
	rc, err := d.Logs(testCtx(t), name, drivers.LogOptions{})
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

// A container with secret files started outside the driver (`incus
// start`) waits for them; the driver's Start then finds it running and
// delivers them, and the command goes on.
func TestSecretFilesStartedOutside(t *testing.T) {
	t.Parallel()
	needIncus(t)
	d := sealedIncus(t, testSealer(t, 9))
	ctx := testCtx(t)
	spec := shSpec(uniqueName("secout"), `[ "$(cat /run/secrets/k)" = '`+secretValue+`' ] || exit 4; echo late-ok; sleep 3600`, nil)
	spec.Secrets = []drivers.SecretFile{{Name: "k", Value: secretValue}}
	create(t, d, spec)
	if err := d.c.SetState(ctx, spec.Name, StatePut{Action: "start"}); err != nil {
		t.Fatalf("incus start: %v", err)
	}
	if err := d.Start(ctx, spec.Name); err != nil {
		t.Fatalf("Start of a running container lacking its secrets: %v", err)
	}
	eventually(t, "the command after a late delivery", func() bool {
		if st, _ := d.Inspect(ctx, spec.Name); st.State == drivers.StateStopped {
			t.Fatalf("the command ended (code %d): %s", st.ExitCode, logsOf(t, d, spec.Name))
		}
		return strings.Contains(logsOf(t, d, spec.Name), "late-ok")
	})
	// A second Start finds the files there and pushes nothing (a push
	// would leave the marker, the entrypoint being past its wait).
	if err := d.Start(ctx, spec.Name); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	res, err := d.Exec(ctx, spec.Name, []string{"ls", "-a", secretsDir})
	if err != nil || res.ExitCode != 0 || strings.Contains(string(res.Stdout), secretsReady) {
		t.Errorf("after a second Start, %s holds %q (%v), want k alone", secretsDir, res.Stdout, err)
	}
}
