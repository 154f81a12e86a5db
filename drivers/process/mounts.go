package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
)

// Mounts. An instance with mounts runs in a mount namespace of its own
// (CLONE_NEWNS, made private before exec by the Go runtime, so nothing
// mounted there shows on the host). The binds must be made in the child
// before the workload runs, so the child first runs mountScript under
// /bin/sh as root: it bind-mounts each source on its target (recursive,
// then remounted read-only for ro), changes to the working directory,
// and execs the workload, through setpriv when the spec names a user.
// exec keeps the pid, so the run's pid, process group, token and adoption
// are those of a run without mounts.
//
// A named volume is the directory DIR/volumes/NAME, made 0755 on the
// first start that uses it (owned by the spec's user, so the workload can
// write it) and kept until DeleteVolume. The driver makes no directory on
// the host outside DIR: a target must exist on the host (the instance
// sees the host's filesystem), and a bind source too.

// volumesDir holds the named volumes, one directory each.
func (d *Driver) volumesDir() string { return filepath.Join(d.opts.Dir, "volumes") }

// mountScript is run by /bin/sh -c with, as positional parameters:
// MOUNT N (SOURCE TARGET ro|rw)×N WORKDIR PROGRAM ARGS...
// ($0 is the script's name). Every path is a parameter, never part of
// the script, so no path is ever parsed by the shell.
const mountScript = `set -e
m=$1; n=$2; shift 2
while [ "$n" -gt 0 ]; do
	"$m" --rbind "$1" "$2"
	if [ "$3" = ro ]; then "$m" -o remount,bind,ro "$2"; fi
	shift 3; n=$((n-1))
done
if [ -n "$1" ]; then cd "$1"; fi
shift
exec "$@"`

// Tools the mount step runs; looked up in these places only, never on a
// workload's PATH.
var (
	shellPaths   = []string{"/bin/sh", "/usr/bin/sh"}
	mountPaths   = []string{"/usr/bin/mount", "/bin/mount"}
	setprivPaths = []string{"/usr/bin/setpriv", "/bin/setpriv"}
	nsenterPaths = []string{"/usr/bin/nsenter", "/bin/nsenter"}
)

func findTool(paths []string) (string, error) {
	for _, p := range paths {
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (util-linux)", filepath.Base(paths[0]))
}

// checkMounts validates spec's mounts against this node without changing
// anything: the driver can mount (root, the tools), each bind source
// exists, each target exists on the host and is of the source's kind (a
// directory for a volume).
func checkMounts(spec drivers.Spec) error {
	if len(spec.Mounts) == 0 {
		return nil
	}
	if err := drivers.CheckMounts(spec.Mounts); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("volumes and binds need the process driver to run as root (it mounts them in a private mount namespace); run the daemon as root or use the incus driver")
	}
	tools := [][]string{shellPaths, mountPaths}
	if spec.User != "" {
		tools = append(tools, setprivPaths)
	}
	for _, t := range tools {
		if _, err := findTool(t); err != nil {
			return fmt.Errorf("volumes: %w", err)
		}
	}
	for _, m := range spec.Mounts {
		target, err := os.Stat(m.Target)
		if err != nil {
			return fmt.Errorf("mount target %s does not exist on this node: the process driver mounts over host paths and creates none; create it first, or use the incus driver", m.Target)
		}
		srcDir := true
		if m.Type == drivers.MountBind {
			src, err := os.Stat(m.Source)
			if err != nil {
				return fmt.Errorf("bind source %s: %w (engenho creates no host path)", m.Source, err)
			}
			srcDir = src.IsDir()
		}
		switch {
		case srcDir && !target.IsDir():
			return fmt.Errorf("mount target %s is not a directory, and %s is", m.Target, describeSource(m))
		case !srcDir && target.IsDir():
			return fmt.Errorf("mount target %s is a directory, and bind source %s is not", m.Target, m.Source)
		}
	}
	return nil
}

func describeSource(m drivers.Mount) string {
	if m.Type == drivers.MountVolume {
		return "volume " + m.Source
	}
	return "bind source " + m.Source
}

// checkExternal: every external volume of spec exists; the driver never
// makes one.
func (d *Driver) checkExternal(spec drivers.Spec) error {
	for _, m := range spec.Mounts {
		if !m.External || m.Type != drivers.MountVolume {
			continue
		}
		fi, err := os.Stat(filepath.Join(d.volumesDir(), m.Source))
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("external volume %s does not exist: engenho never makes an external volume; create the directory %s, or drop external: true", m.Source, filepath.Join(d.volumesDir(), m.Source))
		}
	}
	return nil
}

// prepareVolumes makes the spec's named volumes that do not exist yet,
// owned by the workload's user; an external one is left alone.
func (d *Driver) prepareVolumes(spec drivers.Spec, id identity) error {
	for _, m := range spec.Mounts {
		if m.Type != drivers.MountVolume || m.External {
			continue
		}
		if err := os.MkdirAll(d.volumesDir(), 0o700); err != nil {
			return fmt.Errorf("volumes: %w", err)
		}
		dir := filepath.Join(d.volumesDir(), m.Source)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("volume %s: %w", m.Source, err)
		}
		// Mkdir's mode is cut by the umask; a volume is 0755 whatever it is.
		if err := os.Chmod(dir, 0o755); err != nil {
			return fmt.Errorf("volume %s: %w", m.Source, err)
		}
		if id.cred != nil {
			if err := os.Chown(dir, int(id.cred.Uid), int(id.cred.Gid)); err != nil {
				return fmt.Errorf("volume %s: %w", m.Source, err)
			}
		}
	}
	return nil
}

// mountLaunch turns a run of prog (argv) into the mount step that ends in
// it: the program and argv to spawn, run as root in a new mount
// namespace (sys is changed: Unshareflags and Credential), with the
// working directory entered after the mounts.
func (d *Driver) mountLaunch(spec drivers.Spec, prog string, argv []string, id identity, sys *syscall.SysProcAttr) (string, []string, error) {
	sh, err := findTool(shellPaths)
	if err != nil {
		return "", nil, err
	}
	mount, err := findTool(mountPaths)
	if err != nil {
		return "", nil, err
	}
	mounts := append([]drivers.Mount(nil), spec.Mounts...)
	drivers.SortMounts(mounts)
	out := []string{"sh", "-c", mountScript, "engenho-mount", mount, strconv.Itoa(len(mounts))}
	for _, m := range mounts {
		src := m.Source
		if m.Type == drivers.MountVolume {
			src = filepath.Join(d.volumesDir(), m.Source)
		}
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		out = append(out, src, m.Target, mode)
	}
	out = append(out, spec.WorkingDir)
	if id.cred != nil {
		priv, err := setprivArgs(id)
		if err != nil {
			return "", nil, err
		}
		out = append(out, priv...)
	}
	out = append(out, prog)
	out = append(out, argv[1:]...)
	sys.Unshareflags |= unix.CLONE_NEWNS
	sys.Credential = nil // the mounts need root; setpriv drops it
	return sh, out, nil
}

// setprivArgs switches to id's user, group and supplementary groups, as
// the Credential of a run without mounts would.
func setprivArgs(id identity) ([]string, error) {
	priv, err := findTool(setprivPaths)
	if err != nil {
		return nil, err
	}
	args := []string{priv, "--reuid=" + strconv.FormatUint(uint64(id.cred.Uid), 10), "--regid=" + strconv.FormatUint(uint64(id.cred.Gid), 10)}
	if len(id.cred.Groups) == 0 {
		args = append(args, "--clear-groups")
	} else {
		gs := make([]string, len(id.cred.Groups))
		for i, g := range id.cred.Groups {
			gs[i] = strconv.FormatUint(uint64(g), 10)
		}
		args = append(args, "--groups="+strings.Join(gs, ","))
	}
	return append(args, "--"), nil
}

// execInNamespace makes a probe of an instance with mounts run in the
// instance's mount namespace (that of pid, its run's leader), so it sees
// what the workload sees: nsenter as root, then setpriv to the user.
func execInNamespace(pid int, wd, prog string, argv []string, id identity) (string, []string, identity, error) {
	nsenter, err := findTool(nsenterPaths)
	if err != nil {
		return "", nil, id, err
	}
	out := []string{"nsenter", "--mount=/proc/" + strconv.Itoa(pid) + "/ns/mnt"}
	if wd != "" {
		out = append(out, "--wdns="+wd) // --wd would open it outside the namespace
	}
	out = append(out, "--")
	if id.cred != nil {
		priv, err := setprivArgs(id)
		if err != nil {
			return "", nil, id, err
		}
		out = append(out, priv...)
	}
	out = append(out, prog)
	out = append(out, argv[1:]...)
	id.cred = nil
	return nsenter, out, id, nil
}

// ListVolumes returns the named volumes under DIR/volumes whose name
// starts with prefix, sorted.
func (d *Driver) ListVolumes(ctx context.Context, prefix string) ([]string, error) {
	entries, err := os.ReadDir(d.volumesDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, drivers.Wrap(DriverName, "list volumes", prefix, drivers.ErrTransient, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && drivers.ValidVolumeName(e.Name()) && strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// DeleteVolume deletes the named volume's directory and everything in
// it. A volume an instance's spec mounts is refused (delete the instance
// first); a missing one is not an error.
func (d *Driver) DeleteVolume(ctx context.Context, name string) error {
	const op = "delete volume"
	if !drivers.ValidVolumeName(name) {
		return d.errorf(op, name, drivers.ErrInvalid, "invalid volume name")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.errorf(op, name, drivers.ErrInvalid, "driver closed")
	}
	for _, in := range d.instances {
		if user := in.mountsVolume(name); user != "" {
			return d.errorf(op, name, drivers.ErrInvalid, "volume is mounted by instance %s", user)
		}
	}
	if err := os.RemoveAll(filepath.Join(d.volumesDir(), name)); err != nil {
		return drivers.Wrap(DriverName, op, name, drivers.ErrTransient, err)
	}
	return nil
}

// mountsVolume returns in's name when its spec mounts the named volume.
func (in *instance) mountsVolume(name string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.deleted {
		return ""
	}
	for _, m := range in.rec.Spec.Mounts {
		if m.Type == drivers.MountVolume && m.Source == name {
			return in.name
		}
	}
	return ""
}
