package process_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/process"
)

// secretsDriver is a sealed driver whose secret files go in a directory
// of its own on /dev/shm (tmpfs), removed when the test ends.
func secretsDriver(t *testing.T, dir, secrets string, sealer drivers.Sealer) *process.Driver {
	t.Helper()
	d, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot, Logger: zerolog.Nop(), Sealer: sealer, SecretsDir: secrets})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

func shmDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "engenho-secrets-test-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	os.Chmod(dir, 0o755) // as /run is: any workload's user passes through
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "secrets")
}

var secretsDirLine = regexp.MustCompile(`DIR=(\S+)`)

// The secrets directory the workload was told of.
func workloadSecretsDir(t *testing.T, d drivers.Driver, name string) string {
	t.Helper()
	var dir string
	waitFor(t, "the workload to print its secrets directory", func() bool {
		m := secretsDirLine.FindStringSubmatch(readLogs(t, d, name))
		if m != nil {
			dir = m[1]
		}
		return m != nil
	})
	return dir
}

type fileWant struct {
	content  string
	mode     os.FileMode
	uid, gid uint32
}

func checkSecretFiles(t *testing.T, dir string, owner uint32, want map[string]fileWant) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type != 0x01021994 {
		t.Errorf("secrets directory %s is not on tmpfs (%v, type %#x)", dir, err, st.Type)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != owner {
		t.Errorf("secrets directory: mode %v owner %d, want 0700 owned by %d", fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, owner)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(want) {
		t.Errorf("secrets directory holds %d files, want %d", len(entries), len(want))
	}
	for name, w := range want {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != w.content {
			t.Errorf("%s: content differs (%v)", name, err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sys := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != w.mode || sys.Uid != w.uid || sys.Gid != w.gid {
			t.Errorf("%s: mode %v owner %d:%d, want %v %d:%d", name, fi.Mode().Perm(), sys.Uid, sys.Gid, w.mode, w.uid, w.gid)
		}
	}
}

// Compose secrets on the process driver: each file of Spec.Secrets is in
// the instance's private directory on tmpfs ($ENGENHO_SECRETS_DIR, mode
// 0700), mode 0400 by default or the spec's, with its value; the state
// file holds the values only sealed (SEC-2); a driver opened again on the
// directory (a daemon restart) writes them again at the next start, even
// when the memory file system lost them (a reboot); Delete removes the
// directory.
func TestSecretFilesSEC2(t *testing.T) {
	dir, secrets := t.TempDir(), shmDir(t)
	key := testSealer(t, 1)
	a := secretsDriver(t, dir, secrets, key)
	spec := shSpec("filevault", `echo "DIR=$ENGENHO_SECRETS_DIR"; sha256sum "$ENGENHO_SECRETS_DIR/db"; sleep 3600`, nil)
	spec.Env = map[string]string{process.EnvSecretsDir: "/spec/cannot/choose"}
	spec.Secrets = []drivers.SecretFile{{Name: "db", Value: secretValue}, {Name: "api.key", Value: "k-e-y\n", Mode: 0o440}}
	mustCreate(t, a, spec)
	first := mustStart(t, a, "filevault")
	sdir := workloadSecretsDir(t, a, "filevault")
	if sdir != filepath.Join(secrets, "filevault") {
		t.Fatalf("ENGENHO_SECRETS_DIR = %s, want %s", sdir, filepath.Join(secrets, "filevault"))
	}
	want := map[string]fileWant{"db": {secretValue, 0o400, 0, 0}, "api.key": {"k-e-y\n", 0o440, 0, 0}}
	checkSecretFiles(t, sdir, 0, want)
	if res, err := a.Exec(ctxT(t), "filevault", []string{"sh", "-c", `cat "$ENGENHO_SECRETS_DIR/api.key"`}); err != nil || string(res.Stdout) != "k-e-y\n" {
		t.Errorf("an exec probe reads the secret files: %q %v", res.Stdout, err)
	}
	state, err := os.ReadFile(filepath.Join(dir, "instances", "filevault", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(state, []byte(secretValue)) || bytes.Contains(state, []byte("k-e-y")) ||
		!bytes.Contains(state, []byte(`"sealed_secrets":{`)) || !bytes.Contains(state, []byte(`"db":"v1:`)) {
		t.Fatalf("state file: %s", state)
	}
	a.Close()

	// A daemon restart: the run is adopted; the memory file system is
	// emptied (as by a reboot); the next start writes the files again.
	b := secretsDriver(t, dir, secrets, key)
	defer b.Close()
	if st, err := b.Inspect(ctxT(t), "filevault"); err != nil || st.Pid != first.Pid {
		t.Fatalf("not adopted: %+v %v", st, err)
	}
	if err := b.Kill(ctxT(t), "filevault"); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(secrets)
	os.Truncate(filepath.Join(dir, "instances", "filevault", "output.log"), 0)
	mustStart(t, b, "filevault")
	checkSecretFiles(t, workloadSecretsDir(t, b, "filevault"), 0, want)
	if err := b.Kill(ctxT(t), "filevault"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctxT(t), "filevault"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sdir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Delete left the secrets directory: %v", err)
	}
}

// A workload that runs as another user owns its secrets directory and
// files, and reads them; other users cannot list the parent directory.
func TestSecretFilesOwnedByTheUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as another user")
	}
	secrets := shmDir(t)
	d := secretsDriver(t, t.TempDir(), secrets, testSealer(t, 1))
	defer d.Close()
	spec := shSpec("asnobody", `echo "DIR=$ENGENHO_SECRETS_DIR"; cat "$ENGENHO_SECRETS_DIR/pw"; echo; sleep 3600`, nil)
	spec.User = "65534:65534"
	spec.Secrets = []drivers.SecretFile{{Name: "pw", Value: "nobody-reads-me"}}
	mustCreate(t, d, spec)
	mustStart(t, d, "asnobody")
	defer d.Kill(ctxT(t), "asnobody")
	sdir := workloadSecretsDir(t, d, "asnobody")
	waitLogs(t, d, "asnobody", "nobody-reads-me")
	checkSecretFiles(t, sdir, 65534, map[string]fileWant{"pw": {"nobody-reads-me", 0o400, 65534, 65534}})
	if fi, err := os.Stat(secrets); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("the parent of the instances' directories: %v %v, want 0711", fi.Mode(), err)
	}
}

// What the driver refuses: secret files without a sealer (they could not
// be kept, SEC-2), a secrets directory on a disk, a name that is not a
// file name, a name given twice, a mode beyond the permission bits. No
// error quotes a value.
func TestSecretFilesRefused(t *testing.T) {
	shm := shmDir(t)
	sealed := secretsDriver(t, t.TempDir(), shm, testSealer(t, 1))
	defer sealed.Close()
	plain, err := process.New(process.Options{Dir: t.TempDir(), CgroupRoot: cgroupRoot, Logger: zerolog.Nop(), SecretsDir: shm})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	onDisk := secretsDriver(t, t.TempDir(), filepath.Join(t.TempDir(), "secrets"), testSealer(t, 1))
	defer onDisk.Close()
	file := func(name, value string, mode uint32) drivers.SecretFile {
		return drivers.SecretFile{Name: name, Value: value, Mode: mode}
	}
	cases := []struct {
		name  string
		d     *process.Driver
		files []drivers.SecretFile
		msg   string
	}{
		{"no sealer", plain, []drivers.SecretFile{file("a", secretValue, 0)}, "no sealer"},
		{"a directory on disk", onDisk, []drivers.SecretFile{file("a", secretValue, 0)}, "tmpfs"},
		{"a path, not a name", sealed, []drivers.SecretFile{file("../a", secretValue, 0)}, "not a file name"},
		{"dot-dot", sealed, []drivers.SecretFile{file("..", secretValue, 0)}, "not a file name"},
		{"twice", sealed, []drivers.SecretFile{file("a", secretValue, 0), file("a", "other", 0)}, "given twice"},
		{"mode", sealed, []drivers.SecretFile{file("a", secretValue, 0o4755)}, "not a permission mode"},
	}
	diskDir := t.TempDir()
	for _, tc := range cases {
		if tc.d == onDisk && onMemory(diskDir) {
			continue // the temporary directory is on tmpfs here: nothing on a disk to refuse
		}
		spec := shSpec("refused", "true", nil)
		spec.Secrets = tc.files
		err := tc.d.Validate(ctxT(t), spec)
		if !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), secretValue) {
			t.Errorf("%s: Validate = %v, want ErrInvalid saying %q", tc.name, err, tc.msg)
		}
		if err := tc.d.Create(ctxT(t), spec); !errors.Is(err, drivers.ErrInvalid) {
			t.Errorf("%s: Create = %v", tc.name, err)
		}
	}
}

func onMemory(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && (st.Type == 0x01021994 || st.Type == 0x858458f6)
}

// A secrets directory someone else could write (a world-writable one, as
// another user could make in /dev/shm) is refused at start: the files are
// never written there.
func TestSecretFilesRefuseAnOpenDirectory(t *testing.T) {
	secrets := shmDir(t)
	if err := os.Mkdir(secrets, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(secrets, 0o777)
	d := secretsDriver(t, t.TempDir(), secrets, testSealer(t, 1))
	defer d.Close()
	spec := shSpec("open", "sleep 3600", nil)
	spec.Secrets = []drivers.SecretFile{{Name: "pw", Value: secretValue}}
	mustCreate(t, d, spec)
	err := d.Start(ctxT(t), "open")
	if err == nil || !strings.Contains(err.Error(), "refusing to put secrets there") || strings.Contains(err.Error(), secretValue) {
		t.Fatalf("Start in a world-writable secrets directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(secrets, "open")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("files were written: %v", err)
	}
}
