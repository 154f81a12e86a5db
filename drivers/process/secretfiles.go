package process

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
)

// Secret files (Compose `secrets:`, drivers.Spec.Secrets). A process has
// no /run/secrets of its own: each instance gets a private directory on a
// memory file system (tmpfs or ramfs, never a disk), SECRETS/INSTANCE,
// mode 0700 and owned by the spec's user, holding one file per secret
// (mode 0400 unless the spec says otherwise), and ENGENHO_SECRETS_DIR names
// it in the workload's (and its exec probes') environment. The files are
// written again before every run, so a reboot (which empties the memory
// file system) or a daemon restart loses nothing; Delete removes the
// directory. The state file keeps the values only sealed with
// Options.Sealer (SEC-2).

// EnvSecretsDir names the instance's secrets directory in its environment.
const EnvSecretsDir = "ENGENHO_SECRETS_DIR"

// secretsRoots are where the default secrets directory may go, in order of
// preference; the first on a memory file system is used.
// Each is directly below a directory every user may pass through (/run,
// /dev/shm), so a workload of any user reaches its own directory.
var secretsRoots = []string{"/run/engenho-secrets", "/dev/shm/engenho-secrets"}

// Magic numbers of the memory file systems (statfs f_type).
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// errNoSecretsDir: no memory file system to keep secret files on.
var errNoSecretsDir = errors.New("no memory file system (tmpfs) for secret files")

// pickSecretsDir settles d.secretsDir: Options.SecretsDir, or the first of
// secretsRoots on a memory file system, with a directory per driver Dir
// below it (two daemons or tests on one host never share instance names).
func (d *Driver) pickSecretsDir() {
	if d.opts.SecretsDir != "" {
		d.secretsDir, d.secretsErr = d.opts.SecretsDir, onMemoryFS(d.opts.SecretsDir)
		d.secretsChain = []string{d.secretsDir}
		return
	}
	abs, err := filepath.Abs(d.opts.Dir)
	if err != nil {
		abs = d.opts.Dir
	}
	sum := sha256.Sum256([]byte(abs))
	sub := hex.EncodeToString(sum[:6])
	var tried []string
	for _, root := range secretsRoots {
		if err := onMemoryFS(root); err == nil {
			d.secretsDir = filepath.Join(root, sub)
			d.secretsChain = []string{root, d.secretsDir}
			return
		}
		tried = append(tried, root)
	}
	d.secretsErr = fmt.Errorf("%w: none of %s is on one (set the process driver's secrets directory)", errNoSecretsDir, strings.Join(tried, ", "))
}

// onMemoryFS reports whether path (or, if it does not exist yet, its
// nearest existing parent) is on tmpfs or ramfs.
func onMemoryFS(path string) error {
	p := filepath.Clean(path)
	for {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			if st.Type == tmpfsMagic || st.Type == ramfsMagic {
				return nil
			}
			return fmt.Errorf("%w: %s is not on one", errNoSecretsDir, path)
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, unix.ENOENT) || parent == p {
			return fmt.Errorf("%w: %s: %v", errNoSecretsDir, path, err)
		}
		p = parent
	}
}

// checkSecretFiles checks the files' names and modes.
func checkSecretFiles(files []drivers.SecretFile) error {
	return drivers.CheckSecretFiles(files)
}

// checkSecretsUsable: a spec with secret files needs a sealer (the state
// file) and a memory file system (the files).
func (d *Driver) checkSecretsUsable(spec drivers.Spec) error {
	if len(spec.Secrets) == 0 {
		return nil
	}
	if d.opts.Sealer == nil {
		return errors.New("the spec has secret files and this driver has no sealer to keep them (SEC-2)")
	}
	return d.secretsErr
}

// instanceSecretsDir is the instance's secrets directory ("" without
// secret files).
func (d *Driver) instanceSecretsDir(spec drivers.Spec) string {
	if len(spec.Secrets) == 0 || d.secretsDir == "" {
		return ""
	}
	return filepath.Join(d.secretsDir, spec.Name)
}

// writeSecretFiles writes the spec's secret files afresh, owned by the
// run's user, and returns their directory ("" when there are none).
func (d *Driver) writeSecretFiles(spec drivers.Spec, id identity) (string, error) {
	if len(spec.Secrets) == 0 {
		return "", nil
	}
	if d.secretsErr != nil {
		return "", d.secretsErr
	}
	dir := d.instanceSecretsDir(spec)
	if err := d.ensureSecretsChain(); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("secrets directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("secrets directory: %w", err)
	}
	for _, f := range spec.Secrets {
		if err := writeSecretFile(filepath.Join(dir, f.Name), f, id); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("secret file %s: %w", f.Name, err)
		}
	}
	if id.cred != nil {
		if err := os.Chown(dir, int(id.cred.Uid), int(id.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("secrets directory: %w", err)
		}
	}
	return dir, nil
}

func writeSecretFile(path string, f drivers.SecretFile, id identity) error {
	mode := os.FileMode(f.Mode)
	if mode == 0 {
		mode = 0o400
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		// The error names the path, never the content.
		return &os.PathError{Op: "create", Path: path, Err: err}
	}
	file := os.NewFile(uintptr(fd), path)
	defer file.Close()
	if _, err := file.WriteString(f.Value); err != nil {
		return errors.New("write failed")
	}
	if id.cred != nil {
		if err := file.Chown(int(id.cred.Uid), int(id.cred.Gid)); err != nil {
			return err
		}
	}
	return file.Chmod(mode) // after the writes: a 0400 file is written too
}

// ensureSecretsChain makes the directories above the instances' ones, as
// 0711 (a workload's user may pass through to its own directory, never
// list the others), and checks that nobody else could have made them: a
// directory in world-writable /dev/shm that another user created, or a
// symlink, would hand them every secret.
func (d *Driver) ensureSecretsChain() error {
	if err := os.MkdirAll(filepath.Dir(d.secretsChain[0]), 0o755); err != nil {
		return fmt.Errorf("secrets directory: %w", err)
	}
	for _, p := range d.secretsChain {
		if err := os.Mkdir(p, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("secrets directory: %w", err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("secrets directory: %w", &os.PathError{Op: "lstat", Path: p, Err: err})
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
			return fmt.Errorf("secrets directory %s is not a directory of this daemon's user writable only by it: refusing to put secrets there", p)
		}
		if st.Mode&0o777 != 0o711 {
			if err := os.Chmod(p, 0o711); err != nil {
				return fmt.Errorf("secrets directory: %w", err)
			}
		}
	}
	return nil
}

// removeSecretFiles removes an instance's secrets directory, if any.
func (d *Driver) removeSecretFiles(name string) error {
	if d.secretsDir == "" {
		return nil
	}
	if err := os.RemoveAll(filepath.Join(d.secretsDir, name)); err != nil {
		return fmt.Errorf("secrets directory: %w", err)
	}
	return nil
}

// withSecretsDir sets EnvSecretsDir in env (sorted NAME=value) to dir,
// over any value the spec gave it; dir "" leaves env as it is.
func withSecretsDir(env []string, dir string) []string {
	if dir == "" {
		return env
	}
	out := slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, EnvSecretsDir+"=") })
	out = append(out, EnvSecretsDir+"="+dir)
	sort.Strings(out)
	return out
}

// secretFileLabel binds a sealed secret file's value to its name.
func secretFileLabel(name string) string { return "file:" + name }

// sealSecretFiles seals the values of rec.Spec.Secrets into
// rec.SealedSecrets.
func (d *Driver) sealSecretFiles(rec *record) error {
	if len(rec.Spec.Secrets) == 0 {
		return nil
	}
	if d.opts.Sealer == nil {
		return errors.New("the spec has secret files and this driver has no sealer to keep them (SEC-2)")
	}
	rec.SealedSecrets = make(map[string]string, len(rec.Spec.Secrets))
	for _, f := range rec.Spec.Secrets {
		s, err := d.opts.Sealer.Seal(secretFileLabel(f.Name), f.Value)
		if err != nil {
			return fmt.Errorf("sealing secret file %s: %w", f.Name, err)
		}
		rec.SealedSecrets[f.Name] = s
	}
	return nil
}

// openSecretFiles puts the plaintext of rec.SealedSecrets back into
// rec.Spec.Secrets.
func (d *Driver) openSecretFiles(rec *record) error {
	if len(rec.Spec.Secrets) == 0 {
		return nil
	}
	if d.opts.Sealer == nil {
		return errors.New("the state file has sealed secret files and this driver has no sealer to open them")
	}
	for i, f := range rec.Spec.Secrets {
		sealed, ok := rec.SealedSecrets[f.Name]
		if !ok {
			return fmt.Errorf("secret file %s has no sealed value", f.Name)
		}
		v, err := d.opts.Sealer.Open(secretFileLabel(f.Name), sealed)
		if err != nil {
			return fmt.Errorf("secret file %s: %w", f.Name, err)
		}
		rec.Spec.Secrets[i].Value = v
	}
	return nil
}

// withoutSecretValues is files with every value blanked (the state file's
// form; the values are in SealedSecrets).
func withoutSecretValues(files []drivers.SecretFile) []drivers.SecretFile {
	out := slices.Clone(files)
	for i := range out {
		out[i].Value = ""
	}
	return out
}
