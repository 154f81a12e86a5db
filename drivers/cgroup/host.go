package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Version is the cgroup interface a Host uses.
type Version int

const (
	V1 Version = 1
	V2 Version = 2
)

func (v Version) String() string { return "v" + strconv.Itoa(int(v)) }

// The controllers engenho uses. On v2, cpu time comes from the core file
// cpu.stat and needs no controller; CPUAcct is then never missing.
const (
	CPU     = "cpu"     // cpus limit
	CPUAcct = "cpuacct" // cpu time (v1)
	Memory  = "memory"  // memory limit and reservation, memory usage
	Pids    = "pids"    // pids limit and count
)

var wanted = []string{CPU, CPUAcct, Memory, Pids}

// DefaultRoot is the subtree engenho owns below each hierarchy.
const DefaultRoot = "engenho"

// ErrUnavailable is the kind of every error that says a controller or
// the whole subtree cannot be used on this host (not root, not mounted,
// not enabled). Match it with errors.Is.
var ErrUnavailable = errors.New("cgroups unavailable")

// unavailable wraps cause as ErrUnavailable.
type unavailable struct{ msg string }

func (u *unavailable) Error() string        { return u.msg }
func (u *unavailable) Is(target error) bool { return target == ErrUnavailable }

func unavailablef(format string, args ...any) error {
	return &unavailable{msg: fmt.Sprintf(format, args...)}
}

// hierarchy is one mounted cgroup tree: a v1 hierarchy with its
// controllers, or the v2 unified one.
type hierarchy struct {
	mount       string   // mount point, e.g. /sys/fs/cgroup/memory
	controllers []string // of the wanted ones it carries (v1)
	// procsKey is how /proc/PID/cgroup names it: "memory",
	// "cpu,cpuacct", or "" for v2.
	procsKey string
}

// Host is the cgroup layout engenho uses on this machine, rooted at its
// own subtree. Its methods are safe for concurrent use.
type Host struct {
	version Version
	root    string      // the subtree, relative to each mount ("engenho")
	hs      []hierarchy // v1: one per usable hierarchy; v2: the unified one
	// missing maps a wanted controller to why it cannot be used; a
	// controller absent from it works.
	missing map[string]error
	// memsw: v1 memory.memsw.* exists (swap accounting), so a memory
	// limit covers swap too.
	memsw bool
	// hasKill: v2 cgroup.kill exists (Linux 5.14).
	hasKill bool
}

// Options pick the layout; the zero value detects it.
type Options struct {
	// Root is the subtree below each hierarchy (default DefaultRoot). A
	// clean relative path.
	Root string
	// Mountinfo is the text of /proc/self/mountinfo (read when nil);
	// tests hand in their own.
	Mountinfo []byte
	// Version forces V1 or V2 where both are mounted (hybrid hosts); 0
	// picks: v2 when the unified hierarchy is the only one (or has the
	// controllers), else v1.
	Version Version
}

// Detect reads the mounted hierarchies, creates the subtree and checks it
// can hold groups. It fails (ErrUnavailable) only when no hierarchy can be
// used at all; a controller that cannot is listed by Missing.
func Detect(o Options) (*Host, error) {
	if o.Root == "" {
		o.Root = DefaultRoot
	}
	if err := checkRel(o.Root); err != nil {
		return nil, err
	}
	info := o.Mountinfo
	if info == nil {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return nil, unavailablef("cgroups: %v", err)
		}
		info = b
	}
	v1, v2 := parseMountinfo(info)
	version := o.Version
	if version == 0 {
		version = pickVersion(v1, v2)
	}
	h := &Host{version: version, root: o.Root, missing: map[string]error{}}
	var err error
	switch {
	case version == V2 && v2 != "":
		err = h.setupV2(v2)
	case version == V1 && len(v1) > 0:
		err = h.setupV1(v1)
	default:
		err = unavailablef("cgroups: no cgroup %s hierarchy is mounted (see /proc/self/mountinfo)", version)
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

// checkRel refuses a root or group path that is not a clean relative path
// below the mount (SEC-3).
func checkRel(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "..") {
		return fmt.Errorf("cgroup path %q: want a clean relative path like %q", p, DefaultRoot)
	}
	return nil
}

// pickVersion: a pure v2 host, or a hybrid one whose v1 side carries none
// of the wanted controllers, uses v2.
func pickVersion(v1 []hierarchy, v2 string) Version {
	if v2 != "" && len(v1) == 0 {
		return V2
	}
	if len(v1) > 0 {
		return V1
	}
	return V2
}

// parseMountinfo returns the v1 hierarchies that carry wanted controllers
// and the v2 mount point ("" when none).
func parseMountinfo(info []byte) (v1 []hierarchy, v2 string) {
	sc := bufio.NewScanner(bytes.NewReader(info))
	for sc.Scan() {
		// 32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		mount := unescapeMount(fields[4])
		switch tail[0] {
		case "cgroup2":
			if v2 == "" {
				v2 = mount
			}
		case "cgroup":
			var ctrls, all []string
			for _, opt := range strings.Split(tail[2], ",") {
				if slices.Contains(wanted, opt) {
					ctrls = append(ctrls, opt)
				}
				if opt != "rw" && opt != "ro" && !strings.HasPrefix(opt, "name=") && !strings.Contains(opt, "=") {
					all = append(all, opt)
				}
			}
			if len(ctrls) > 0 {
				v1 = append(v1, hierarchy{mount: mount, controllers: ctrls, procsKey: strings.Join(all, ",")})
			}
		}
	}
	return v1, v2
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// setupV1 creates the subtree in every hierarchy that carries a wanted
// controller and keeps those where a group can be made.
func (h *Host) setupV1(v1 []hierarchy) error {
	seen := map[string]bool{}
	for _, hy := range v1 {
		err := probe(filepath.Join(hy.mount, h.root))
		if slices.Contains(strings.Split(hy.procsKey, ","), "cpuset") {
			// A group in a cpuset hierarchy needs its cpus and mems set
			// before a task may join; engenho does not manage cpusets.
			err = fmt.Errorf("%s is mounted together with cpuset, which engenho does not manage", hy.mount)
		}
		if err != nil {
			for _, c := range hy.controllers {
				if !seen[c] {
					h.missing[c] = unavailablef("cgroup %s: %v", c, err)
				}
			}
			continue
		}
		fresh := false
		for _, c := range hy.controllers {
			if !seen[c] {
				seen[c], fresh = true, true
				delete(h.missing, c)
			}
		}
		if fresh {
			h.hs = append(h.hs, hy)
		}
	}
	for _, c := range wanted {
		if !seen[c] && h.missing[c] == nil {
			h.missing[c] = unavailablef("cgroup %s: the %s controller is not mounted on this host (cgroup v1)", c, c)
		}
	}
	if len(h.hs) == 0 {
		return unavailablef("cgroups: no v1 hierarchy can hold engenho's groups: %v", h.missing[Memory])
	}
	if _, err := os.Stat(filepath.Join(h.dirOf(Memory), "memory.memsw.limit_in_bytes")); err == nil {
		h.memsw = true
	}
	return nil
}

// setupV2 creates the subtree in the unified hierarchy and enables the
// wanted controllers down to it.
func (h *Host) setupV2(mount string) error {
	dir := filepath.Join(mount, h.root)
	if err := probe(dir); err != nil {
		return unavailablef("cgroups: %v", err)
	}
	h.hs = []hierarchy{{mount: mount}}
	// Enable each controller on every level from the mount down to the
	// root, so the root's children get it.
	levels := []string{mount}
	rel := ""
	for _, part := range strings.Split(h.root, "/") {
		rel = filepath.Join(rel, part)
		levels = append(levels, filepath.Join(mount, rel))
	}
	for _, c := range []string{CPU, Memory, Pids} {
		var err error
		for _, lvl := range levels {
			if err = enableV2(lvl, c); err != nil {
				break
			}
		}
		if err != nil {
			h.missing[c] = err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err == nil {
		h.hasKill = true
	}
	return nil
}

// enableV2 makes controller c available to the children of dir.
func enableV2(dir, c string) error {
	on, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if slices.Contains(strings.Fields(string(on)), c) {
		return nil
	}
	have, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if !slices.Contains(strings.Fields(string(have)), c) {
		return unavailablef("cgroup %s: the %s controller is not available in %s (cgroup v2; on a hybrid host it is bound to a v1 hierarchy)", c, c, dir)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c); err != nil {
		return unavailablef("cgroup %s: enabling it in %s: %v", c, dir, err)
	}
	return nil
}

// probe makes dir and proves a group can be created below it.
func probe(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, ".probe-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Remove(p)
}

// Version is the interface in use.
func (h *Host) Version() Version { return h.version }

// Root is the subtree engenho's groups live in.
func (h *Host) Root() string { return h.root }

// Missing says why controller c cannot be used; nil when it can.
func (h *Host) Missing(c string) error {
	if h.version == V2 && c == CPUAcct {
		return nil // cpu.stat is a core file
	}
	return h.missing[c]
}

// Describe is one line for logs and docs: "cgroup v1 at /sys/fs/cgroup/*
// (root engenho): cpu cpuacct memory pids".
func (h *Host) Describe() string {
	var ok []string
	for _, c := range wanted {
		if h.Missing(c) == nil {
			ok = append(ok, c)
		}
	}
	mounts := make([]string, len(h.hs))
	for i, hy := range h.hs {
		mounts[i] = hy.mount
	}
	return fmt.Sprintf("cgroup %s at %s (root %s): %s", h.version, strings.Join(mounts, ","), h.root, strings.Join(ok, " "))
}

// dirOf is the subtree's directory in the hierarchy carrying controller
// c ("" when none does).
func (h *Host) dirOf(c string) string {
	for _, hy := range h.hs {
		if h.version == V2 || slices.Contains(hy.controllers, c) {
			return filepath.Join(hy.mount, h.root)
		}
	}
	return ""
}

// Groups lists the groups below the subtree, by relative path (ROOT/NAME),
// in any of its hierarchies.
func (h *Host) Groups() []string {
	seen := map[string]bool{}
	var out []string
	for _, hy := range h.hs {
		entries, _ := os.ReadDir(filepath.Join(hy.mount, h.root))
		for _, e := range entries {
			if rel := filepath.Join(h.root, e.Name()); e.IsDir() && !seen[rel] {
				seen[rel] = true
				out = append(out, rel)
			}
		}
	}
	slices.Sort(out)
	return out
}

// RemoveRoot removes the subtree's own directory in every hierarchy, and
// its parents up to the mount while they are empty; it fails while a
// group is left in it.
func (h *Host) RemoveRoot() error {
	var errs []error
	for _, hy := range h.hs {
		rel := h.root
		for rel != "." && rel != "" {
			err := os.Remove(filepath.Join(hy.mount, rel))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				if rel == h.root {
					errs = append(errs, err)
				}
				break
			}
			rel = filepath.Dir(rel)
		}
	}
	return errors.Join(errs...)
}
