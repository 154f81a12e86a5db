package process

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/engenho/engenho/drivers"
)

// defaultPath is PATH for workloads when neither the spec nor the daemon
// sets one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// checkSpec validates spec without touching anything: the name, the
// command (it resolves), the working directory, the user and the ports.
func checkSpec(spec drivers.Spec) error {
	if err := drivers.CheckName(spec.Name); err != nil {
		return err
	}
	if spec.Image != "" {
		// Silently running the command on the host in place of the
		// image would be a different program.
		return fmt.Errorf("image %s: the process driver runs commands on this node, not images; run the image with driver: incus, or drop image and give the command to run", spec.Image)
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return errors.New("command is empty")
	}
	if spec.WorkingDir != "" {
		fi, err := os.Stat(spec.WorkingDir)
		if err != nil {
			return fmt.Errorf("working_dir: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("working_dir %s is not a directory", spec.WorkingDir)
		}
	}
	if _, err := resolveCommand(spec); err != nil {
		return err
	}
	if _, err := credentialFor(spec.User); err != nil {
		return err
	}
	for _, k := range spec.SecretEnv {
		if _, ok := spec.Env[k]; !ok {
			return fmt.Errorf("secret env %s is not in env", k)
		}
	}
	if err := checkPorts(spec.Ports); err != nil {
		return err
	}
	if err := checkSecretFiles(spec.Secrets); err != nil {
		return err
	}
	return checkMounts(spec)
}

func checkPorts(ports []drivers.Port) error {
	seen := map[int]bool{}
	for _, p := range ports {
		if p.Target < 1 || p.Target > 65535 {
			return fmt.Errorf("port target %d is not in 1..65535", p.Target)
		}
		if p.HostPort < 0 || p.HostPort > 65535 {
			return fmt.Errorf("host port %d is not in 0..65535", p.HostPort)
		}
		if p.Protocol != "" && p.Protocol != "tcp" {
			return fmt.Errorf("port %d: protocol %q is not supported (tcp only)", p.Target, p.Protocol)
		}
		if seen[p.Target] {
			return fmt.Errorf("port target %d is published twice", p.Target)
		}
		seen[p.Target] = true
	}
	return nil
}

// resolveCommand finds the program to run: a name without "/" is looked up
// on the workload's PATH; a relative path is taken from the working
// directory, as execve would from there.
func resolveCommand(spec drivers.Spec) (string, error) {
	prog := spec.Command[0]
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) && spec.WorkingDir != "" {
			prog = filepath.Join(spec.WorkingDir, prog)
		}
		if err := isExecutable(prog); err != nil {
			return "", fmt.Errorf("command %s: %w", spec.Command[0], err)
		}
		return prog, nil
	}
	for _, dir := range filepath.SplitList(workloadPath(spec)) {
		if dir == "" {
			dir = "."
		}
		path := filepath.Join(dir, prog)
		if isExecutable(path) == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("command %q not found on PATH %s", prog, workloadPath(spec))
}

func isExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}

func workloadPath(spec drivers.Spec) string {
	if p, ok := spec.Env["PATH"]; ok {
		return p
	}
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return defaultPath
}

// identity is who a workload runs as; nil credential means the daemon's.
type identity struct {
	cred *syscall.Credential
	home string
}

// credentialFor reads "uid[:gid]", "name" or "name:group". A known user
// gets its primary group and supplementary groups; a bare numeric uid with
// no passwd entry gets gid = uid and no supplementary groups.
func credentialFor(spec string) (identity, error) {
	if spec == "" {
		return identity{}, nil
	}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	id := identity{cred: &syscall.Credential{}}
	u, err := lookupUser(userPart)
	if err != nil {
		return identity{}, err
	}
	if u != nil {
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		id.cred.Uid, id.cred.Gid, id.home = uint32(uid), uint32(gid), u.HomeDir
		if gids, err := u.GroupIds(); err == nil {
			for _, g := range gids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					id.cred.Groups = append(id.cred.Groups, uint32(n))
				}
			}
		}
	} else {
		uid, _ := strconv.ParseUint(userPart, 10, 32)
		id.cred.Uid, id.cred.Gid = uint32(uid), uint32(uid)
	}
	if hasGroup {
		gid, err := lookupGroup(groupPart)
		if err != nil {
			return identity{}, err
		}
		id.cred.Gid = gid
	}
	if os.Geteuid() != 0 && int(id.cred.Uid) != os.Geteuid() {
		return identity{}, fmt.Errorf("user %q: the daemon is not root and cannot switch to uid %d", spec, id.cred.Uid)
	}
	return id, nil
}

// lookupUser returns the passwd entry for a name or uid; nil (no error)
// for a numeric uid that has none.
func lookupUser(s string) (*user.User, error) {
	if s == "" {
		return nil, errors.New("user: empty user name")
	}
	if _, err := strconv.ParseUint(s, 10, 32); err == nil {
		u, err := user.LookupId(s)
		if err != nil {
			return nil, nil
		}
		return u, nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", s, err)
	}
	return u, nil
}

func lookupGroup(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, fmt.Errorf("group %q: %w", s, err)
	}
	n, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("group %q: gid %q: %w", s, g.Gid, err)
	}
	return uint32(n), nil
}

// workloadEnv is the environment of a run: PATH and HOME, then the spec's
// env, then PORT (first port) and PORT_<target> for each published port.
// Nothing else of the daemon's environment is passed on, so the daemon's
// own secrets never reach a workload.
func workloadEnv(spec drivers.Spec, id identity, hostPorts map[int]int) []string {
	env := map[string]string{"PATH": workloadPath(spec)}
	if id.home != "" {
		env["HOME"] = id.home
	} else if h := os.Getenv("HOME"); h != "" && id.cred == nil {
		env["HOME"] = h
	} else {
		env["HOME"] = "/"
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	for i, p := range spec.Ports {
		hp := strconv.Itoa(hostPorts[p.Target])
		if i == 0 {
			env["PORT"] = hp
		}
		env["PORT_"+strconv.Itoa(p.Target)] = hp
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// assignPorts returns target -> host port for a run; a HostPort of 0 gets
// one from hp (SVC-24). The ports it picked for the previous run (prev) are
// released first: with the allocator's walk they are not handed out again
// at once. Picked ports are probed free, but can in principle be taken
// before the workload binds them.
func assignPorts(hp HostPorts, ports []drivers.Port, prev map[int]int) (map[int]int, error) {
	hp.Release(picked(ports, prev)...)
	out := make(map[int]int, len(ports))
	for _, p := range ports {
		if p.HostPort != 0 {
			out[p.Target] = p.HostPort
			continue
		}
		port, err := hp.Take()
		if err != nil {
			hp.Release(picked(ports, out)...)
			return nil, fmt.Errorf("pick a free port for %d: %w", p.Target, err)
		}
		out[p.Target] = port
	}
	return out, nil
}

// picked lists the host ports of hostPorts that the driver chose (the
// spec's HostPort is 0 for their target).
func picked(ports []drivers.Port, hostPorts map[int]int) []int {
	var out []int
	for _, p := range ports {
		if hp, ok := hostPorts[p.Target]; p.HostPort == 0 && ok {
			out = append(out, hp)
		}
	}
	return out
}

// addresses is Status.Addresses for hostPorts.
func addresses(hostPorts map[int]int) map[int]string {
	if len(hostPorts) == 0 {
		return nil
	}
	out := make(map[int]string, len(hostPorts))
	for target, hp := range hostPorts {
		out[target] = "127.0.0.1:" + strconv.Itoa(hp)
	}
	return out
}
