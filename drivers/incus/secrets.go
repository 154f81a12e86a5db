package incus

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/engenho/engenho/drivers"
)

// Secret files (drivers.Spec.Secrets) live on a tmpfs at /run/secrets that
// LXC mounts in the container before its init runs (an lxc.mount.entry in
// raw.lxc), so they are never on the host's disk where the rootfs is
// (SEC-2). A tmpfs is empty at every start: Start pushes the files through
// the files API (it reaches into the running container's mounts) once the
// container runs, then writes secretsReady; the entrypoint waits for that
// file before it runs the command, so the command sees its secrets from
// its first instruction. The values are kept at rest only sealed with
// Options.Sealer (the node key), in the instance's config key sealedKey,
// so a driver made again after a daemon restart starts the instance with
// them; incusd never sees them in plaintext outside the file pushes.
const (
	secretsDir = "/run/secrets"
	// secretsReady is written last; the entrypoint removes it before the
	// command starts.
	secretsReady = ".engenho-ready"
	// sealedKey holds the sealed secret files (not a label).
	sealedKey = labelPrefix + "engenho.secret-files"
	// secretsWait bounds the entrypoint's wait for the files, in tenths of
	// a second: past it the container ends with code 125 (started outside
	// engenho, or the push failed).
	secretsWait = 900
	// secretsMount is the tmpfs LXC mounts (create=dir makes the mount
	// point, an empty directory, in the rootfs when the image lacks it).
	secretsMount = "lxc.mount.entry = tmpfs run/secrets tmpfs rw,nosuid,nodev,noexec,mode=0755,size=16m,create=dir 0 0"
	// secretsMax is what the secret files of one spec may hold together
	// (the tmpfs's size less room for its inodes).
	secretsMax = 15 << 20
)

// sealedSecret is one secret file as sealed in sealedKey.
type sealedSecret struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Mode  uint32 `json:"mode"`
}

// checkSecrets checks the secret files' names and modes and that the
// driver can deliver them: they need the entrypoint (a Command) to wait
// for them and a sealer to keep them across restarts.
func (d *Driver) checkSecrets(spec drivers.Spec, bad func(string, ...any) error) error {
	if len(spec.Secrets) == 0 {
		return nil
	}
	if len(spec.Command) == 0 {
		return drivers.Errorf(DriverName, "validate", spec.Name, drivers.ErrUnsupported, "secret files need a command: the incus driver delivers them before the command starts, and cannot hold back an image's own init")
	}
	if d.opts.Sealer == nil {
		return drivers.Errorf(DriverName, "validate", spec.Name, drivers.ErrUnsupported, "secret files need the driver's sealer (the node key) to keep them across restarts; none is configured")
	}
	if err := drivers.CheckSecretFiles(spec.Secrets); err != nil {
		return bad("%v", err)
	}
	total := 0
	for _, s := range spec.Secrets {
		total += len(s.Value)
		if s.Name == secretsReady {
			return bad("secret file name %q is the driver's own", s.Name)
		}
	}
	if total > secretsMax {
		return bad("the secret files hold %d bytes; the tmpfs at %s holds %d", total, secretsDir, secretsMax)
	}
	return nil
}

func secretsLabel(instance string) string { return "incus-secret-files:" + instance }

// sealSecrets returns the sealedKey value for spec's secrets, bound to
// the instance's name.
func (d *Driver) sealSecrets(spec drivers.Spec) (string, error) {
	files := make([]sealedSecret, len(spec.Secrets))
	for i, s := range spec.Secrets {
		files[i] = sealedSecret{Name: s.Name, Value: s.Value, Mode: s.Mode}
	}
	plain, err := json.Marshal(files)
	if err != nil {
		return "", err
	}
	return d.opts.Sealer.Seal(secretsLabel(spec.Name), string(plain))
}

// openSecrets returns the secret files sealed in an instance's config
// (none when it has none). Its errors never hold a value.
func (d *Driver) openSecrets(in Instance) ([]sealedSecret, error) {
	sealed := in.Config[sealedKey]
	if sealed == "" {
		return nil, nil
	}
	if d.opts.Sealer == nil {
		return nil, fmt.Errorf("the instance has secret files but the driver has no sealer to open them")
	}
	plain, err := d.opts.Sealer.Open(secretsLabel(in.Name), sealed)
	if err != nil {
		return nil, fmt.Errorf("opening the sealed secret files (another node key?): %w", err)
	}
	var files []sealedSecret
	if err := json.Unmarshal([]byte(plain), &files); err != nil {
		return nil, fmt.Errorf("the sealed secret files do not decode")
	}
	return files, nil
}

// pushSecrets writes the secret files into the running container's
// /run/secrets, root-owned with their modes (0400 when 0), then
// secretsReady.
func (d *Driver) pushSecrets(ctx context.Context, name string, files []sealedSecret) error {
	for _, f := range files {
		mode := f.Mode
		if mode == 0 {
			mode = 0o400
		}
		if err := d.withFiles(ctx, name, func() error {
			return d.c.WriteFile(ctx, name, secretsDir+"/"+f.Name, []byte(f.Value), int(mode))
		}); err != nil {
			return fmt.Errorf("writing secret file %q: %w", f.Name, err)
		}
	}
	return d.withFiles(ctx, name, func() error {
		return d.c.WriteFile(ctx, name, secretsDir+"/"+secretsReady, nil, 0o400)
	})
}

// deliverSecrets gives a container that was just started its secret
// files; when that fails it is stopped again (its entrypoint would wait in
// vain) and the error says why.
func (d *Driver) deliverSecrets(ctx context.Context, in Instance) error {
	files, err := d.openSecrets(in)
	if err == nil && len(files) > 0 {
		err = d.pushSecrets(ctx, in.Name, files)
	}
	if err == nil {
		return nil
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	if kerr := d.c.SetState(kctx, in.Name, StatePut{Action: "stop", Force: true}); kerr != nil {
		d.log.Warn().Err(kerr).Str("instance", in.Name).Msg("could not stop an instance whose secrets were not delivered")
	}
	return d.fail("start", in.Name, fmt.Errorf("delivering the secret files: %w", err))
}

// secretsIfMissing delivers the secret files to a container found
// running at Start (started outside engenho, or by a start whose answer
// was lost) whose tmpfs lacks them: its entrypoint is still waiting.
func (d *Driver) secretsIfMissing(ctx context.Context, in Instance) error {
	if in.Config[sealedKey] == "" {
		return nil
	}
	files, err := d.openSecrets(in)
	if err != nil || len(files) == 0 {
		return d.deliverSecrets(ctx, in) // stops it, says why
	}
	if _, err := d.readFile(ctx, in.Name, secretsDir+"/"+files[0].Name, 0); !IsNotFound(err) {
		return nil // there (or unknown: not pushed twice)
	}
	return d.deliverSecrets(ctx, in)
}

// waitSecretsScript is the entrypoint's wait for secretsReady (see
// entrypoint): a stop meanwhile ends it with 143.
func waitSecretsScript(exitFile string) []string {
	ready := secretsDir + "/" + secretsReady
	return []string{
		fmt.Sprintf(`trap 'echo 143 >"%s"; exit 143' TERM PWR INT`, exitFile),
		`n=0`,
		fmt.Sprintf(`while [ ! -e %s ]; do`, ready),
		fmt.Sprintf(`	n=$((n+1)); if [ "$n" -gt %d ]; then echo "engenho: the secret files did not arrive in %s (was the container started outside engenho?)"; echo 125 >"%s"; exit 125; fi`, secretsWait, secretsDir, exitFile),
		`	sleep 0.1 2>/dev/null || sleep 1`,
		`done`,
		fmt.Sprintf(`rm -f %s`, ready),
		`trap - TERM PWR INT`,
	}
}
