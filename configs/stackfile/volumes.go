package stackfile

import (
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/engenho/engenho/drivers"
)

// Volume is one top-level `volumes:` entry: a named volume the node keeps
// across instances (Compose's named volume).
type Volume struct {
	// Name is the volume's node-wide name: the entry's `name:`, else
	// STACK_KEY as Compose names a project's volumes (KEY alone for an
	// external volume, as in Compose). It is what drivers
	// see (drivers.Mount.Source); drivers.ValidVolumeName holds for it.
	Name string `json:"name"`
	// External: the volume is made and deleted outside engenho; `engenho
	// remove --volumes` leaves it.
	External bool `json:"external,omitempty"`
}

// VolumeMount is one entry of a service's `volumes:`.
type VolumeMount struct {
	// Type is drivers.MountVolume or drivers.MountBind.
	Type string `json:"type"`
	// Volume is the top-level key a volume mount names; empty for a bind.
	Volume string `json:"volume,omitempty"`
	// Source is, for a volume, the volume's node-wide name (Volume.Name);
	// for a bind, a clean absolute host path (a relative one in the file
	// is taken from the project directory).
	Source string `json:"source"`
	// Target is the clean absolute path inside the instance.
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// External: the volume is declared external; the driver must find it
	// and never creates it. Not part of the revision (the instance sees
	// the same volume either way).
	External bool `json:"external,omitempty"`
}

// Mounts are svc's volumes as the driver takes them, sorted by target so
// that a mount comes before the mounts below it.
func (s Service) Mounts() []drivers.Mount {
	if len(s.Volumes) == 0 {
		return nil
	}
	out := make([]drivers.Mount, 0, len(s.Volumes))
	for _, v := range s.Volumes {
		out = append(out, drivers.Mount{Type: v.Type, Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly, External: v.External})
	}
	drivers.SortMounts(out)
	return out
}

var topVolumeKeys = []string{"name", "external", "driver", "driver_opts", "labels"}

// topVolumes reads the top-level `volumes:`: NAME: null or a map. The
// node-wide names are settled later (settleVolumes), once the stack's
// name is known.
func (w *walker) topVolumes(n *yaml.Node, path string, st *Stack) {
	r := w.resolve(n, path)
	if r == nil || r.Kind == yaml.ScalarNode && r.ShortTag() == "!!null" {
		return
	}
	entries, ok := w.mapping(r, path)
	if !ok {
		return
	}
	st.Volumes = map[string]Volume{}
	for _, e := range entries {
		w.at(e.kn, e.path)
		if !validVolumeKey(e.key) {
			w.problem(e.kn, e.path, ErrValue, "a volume key is letters, digits, '.', '_' and '-', starting with a letter or digit, at most 63; got %s", quote(e.key))
			continue
		}
		st.Volumes[e.key] = w.topVolume(e.vn, e.path)
	}
}

// topVolume reads one declared volume. Its Name is left empty unless the
// file sets `name:`.
func (w *walker) topVolume(n *yaml.Node, path string) Volume {
	var v Volume
	r := w.resolve(n, path)
	if r == nil || r.Kind == yaml.ScalarNode && r.ShortTag() == "!!null" {
		return v
	}
	entries, ok := w.mapping(r, path)
	if !ok {
		return v
	}
	for _, e := range entries {
		switch e.key {
		case "name":
			if s, ok := w.str(e.vn, e.path); ok {
				v.Name = s
				if !drivers.ValidVolumeName(s) {
					w.problem(e.vn, e.path, ErrValue, "%s", volumeNameProblem(s))
				}
			}
		case "external":
			w.external(&v, e)
		case "driver":
			if s, ok := w.str(e.vn, e.path); ok && s != "local" {
				w.problem(e.vn, e.path, ErrValue, "volume driver %s is not supported: engenho's drivers keep volumes themselves (local only)", quote(s))
			}
		case "driver_opts":
			if r := w.resolve(e.vn, e.path); r != nil && !(r.Kind == yaml.MappingNode && len(r.Content) == 0) && r.ShortTag() != "!!null" {
				w.problem(e.kn, e.path, ErrValue, "not supported: engenho keeps a volume in its own storage; for a host directory, use a bind mount (./dir:/target) in the service")
			}
		case "labels":
			w.warn(e.kn, e.path, "ignored: engenho keeps no labels on volumes")
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, topVolumeKeys)
			}
		}
	}
	return v
}

// external reads `external: true|false`, or Compose's old {name: N}.
func (w *walker) external(v *Volume, e entry) {
	r := w.resolve(e.vn, e.path)
	if r != nil && r.Kind == yaml.MappingNode {
		entries, _ := w.mapping(r, e.path)
		for _, x := range entries {
			if x.key != "name" {
				w.unknownKey(x, []string{"name"})
				continue
			}
			if s, ok := w.str(x.vn, x.path); ok {
				v.Name = s
				if !drivers.ValidVolumeName(s) {
					w.problem(x.vn, x.path, ErrValue, "%s", volumeNameProblem(s))
				}
			}
		}
		v.External = true
		return
	}
	v.External, _ = w.boolean(e.vn, e.path)
}

// settleVolumes gives each declared volume its node-wide name and each
// service volume mount its source, once the stack's name is settled.
// A mount of an undeclared volume keeps an empty source: the checker
// names it.
func settleVolumes(st *Stack) {
	for key, v := range st.Volumes {
		switch {
		case v.Name != "":
		case v.External:
			v.Name = key // Compose names an external volume by its key
		default:
			v.Name = st.Name + "_" + key
		}
		st.Volumes[key] = v
	}
	for name, svc := range st.Services {
		for i, m := range svc.Volumes {
			if m.Type == drivers.MountVolume {
				v := st.Volumes[m.Volume]
				svc.Volumes[i].Source, svc.Volumes[i].External = v.Name, v.External
			}
		}
		st.Services[name] = svc
	}
}

var (
	mountKeys     = []string{"type", "source", "target", "read_only", "bind", "volume", "tmpfs", "consistency"}
	bindOptKeys   = []string{"propagation", "create_host_path", "selinux"}
	volumeOptKeys = []string{"nocopy", "subpath"}
)

// serviceVolumes reads a service's `volumes:`: a list of short-syntax
// strings or long-syntax maps.
func (w *walker) serviceVolumes(n *yaml.Node, path string) []VolumeMount {
	items, ok := w.sequence(n, path)
	if !ok {
		return nil
	}
	var out []VolumeMount
	for i, item := range items {
		p := index(path, i)
		r := w.resolve(item, p)
		if r == nil {
			continue
		}
		w.at(r, p)
		var (
			m  VolumeMount
			ok bool
		)
		if r.Kind == yaml.MappingNode {
			m, ok = w.longMount(r, p)
		} else if s, isStr := w.str(r, p); isStr {
			m, ok = w.shortMount(r, p, s)
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// shortMount reads SOURCE:TARGET[:MODE] or a lone TARGET.
func (w *walker) shortMount(n *yaml.Node, p, s string) (VolumeMount, bool) {
	parts := strings.Split(s, ":")
	if len(parts) == 1 {
		w.problem(n, p, ErrValue, "%s", anonymousProblem(s))
		return VolumeMount{}, false
	}
	if len(parts) > 3 {
		w.problem(n, p, ErrValue, "want SOURCE:TARGET[:MODE], got %d parts separated by ':'", len(parts))
		return VolumeMount{}, false
	}
	m := VolumeMount{Target: parts[1]}
	if len(parts) == 3 {
		for _, mode := range strings.Split(parts[2], ",") {
			switch mode {
			case "ro":
				m.ReadOnly = true
			case "rw":
			case "z", "Z":
				w.warn(n, p, "mode %s ignored: engenho does no SELinux relabelling", mode)
			case "cached", "delegated", "consistent":
				// Docker Desktop's consistency hints; nothing to do on Linux.
			case "nocopy":
				// engenho never copies an image's files into a volume.
			default:
				w.problem(n, p, ErrValue, "mode %s: want ro or rw (z, Z, nocopy, cached and delegated are accepted too)", quote(mode))
				return VolumeMount{}, false
			}
		}
	}
	src := parts[0]
	if isPathSource(src) {
		m.Type = drivers.MountBind
		var ok bool
		if m.Source, ok = w.bindSource(n, p, src); !ok {
			return VolumeMount{}, false
		}
	} else {
		m.Type, m.Volume = drivers.MountVolume, src
	}
	return m, w.mountTarget(n, p, m.Target)
}

// longMount reads {type, source, target, read_only, bind, volume, ...}.
func (w *walker) longMount(n *yaml.Node, p string) (VolumeMount, bool) {
	entries, _ := w.mapping(n, p)
	var (
		m        VolumeMount
		typ      = drivers.MountVolume
		src      string
		srcNode  *yaml.Node
		tgtNode  *yaml.Node
		allRight = true
	)
	for _, e := range entries {
		switch e.key {
		case "type":
			s, ok := w.str(e.vn, e.path)
			switch {
			case !ok:
				allRight = false
			case s == drivers.MountVolume || s == drivers.MountBind:
				typ = s
			case s == "tmpfs":
				w.problem(e.vn, e.path, ErrValue, "tmpfs mounts are not supported: use a volume")
				allRight = false
			default:
				w.problem(e.vn, e.path, ErrValue, "type %s is not supported: want volume or bind", quote(s))
				allRight = false
			}
		case "source":
			var ok bool
			src, ok = w.str(e.vn, e.path)
			srcNode = w.resolve(e.vn, e.path)
			allRight = allRight && ok
		case "target":
			var ok bool
			m.Target, ok = w.str(e.vn, e.path)
			tgtNode = w.resolve(e.vn, e.path)
			allRight = allRight && ok
		case "read_only":
			var ok bool
			m.ReadOnly, ok = w.boolean(e.vn, e.path)
			allRight = allRight && ok
		case "bind":
			allRight = w.bindOptions(e) && allRight
		case "volume":
			allRight = w.volumeOptions(e) && allRight
		case "tmpfs":
			w.warn(e.kn, e.path, "ignored: engenho has no tmpfs mounts")
		case "consistency":
			// Docker Desktop's consistency hint; nothing to do on Linux.
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, mountKeys)
				allRight = false
			}
		}
	}
	if tgtNode == nil && allRight {
		w.problem(n, join(p, "target"), ErrMissing, "required: the absolute path inside the instance")
		return VolumeMount{}, false
	}
	if !allRight {
		return VolumeMount{}, false
	}
	m.Type = typ
	switch {
	case srcNode == nil || src == "":
		if typ == drivers.MountBind {
			w.problem(n, join(p, "source"), ErrMissing, "required for a bind: the host path")
		} else {
			w.problem(n, p, ErrValue, "%s", anonymousProblem(m.Target))
		}
		return VolumeMount{}, false
	case typ == drivers.MountBind:
		var ok bool
		if m.Source, ok = w.bindSource(srcNode, join(p, "source"), src); !ok {
			return VolumeMount{}, false
		}
	default:
		if isPathSource(src) {
			w.problem(srcNode, join(p, "source"), ErrValue, "a volume's source is a top-level volume's key, not a path; for a host path use type: bind")
			return VolumeMount{}, false
		}
		m.Volume = src
	}
	return m, w.mountTarget(tgtNode, join(p, "target"), m.Target)
}

func (w *walker) bindOptions(e entry) bool {
	entries, ok := w.mapping(e.vn, e.path)
	if !ok {
		return false
	}
	for _, x := range entries {
		switch x.key {
		case "create_host_path":
			if b, ok := w.boolean(x.vn, x.path); !ok {
				return false
			} else if b {
				w.warn(x.vn, x.path, "engenho creates no host path: the bind source must exist when the instance starts")
			}
		case "propagation":
			if s, ok := w.str(x.vn, x.path); ok && s != "rprivate" && s != "private" {
				w.warn(x.vn, x.path, "propagation %s ignored: engenho's binds are private", quote(s))
			}
		case "selinux":
			w.warn(x.kn, x.path, "ignored: engenho does no SELinux relabelling")
		default:
			if !isExtension(x.key) {
				w.unknownKey(x, bindOptKeys)
				return false
			}
		}
	}
	return true
}

func (w *walker) volumeOptions(e entry) bool {
	entries, ok := w.mapping(e.vn, e.path)
	if !ok {
		return false
	}
	for _, x := range entries {
		switch x.key {
		case "nocopy":
			// engenho never copies an image's files into a volume.
			if _, ok := w.boolean(x.vn, x.path); !ok {
				return false
			}
		case "subpath":
			w.problem(x.kn, x.path, ErrValue, "not supported: mount the whole volume")
			return false
		default:
			if !isExtension(x.key) {
				w.unknownKey(x, volumeOptKeys)
				return false
			}
		}
	}
	return true
}

// isPathSource: Compose reads a short-syntax source as a host path when
// it starts with "/", "." or "~", and as a volume's key otherwise.
func isPathSource(s string) bool {
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~")
}

// bindSource makes a bind's source a clean absolute host path: a
// relative one is taken from the project directory, as Compose does.
func (w *walker) bindSource(n *yaml.Node, p, s string) (string, bool) {
	switch {
	case strings.ContainsRune(s, 0):
		w.problem(n, p, ErrValue, "a path holds no NUL byte")
		return "", false
	case strings.HasPrefix(s, "~"):
		w.problem(n, p, ErrValue, "a bind source starting with ~ is not supported (whose home would it be on the node?): write the absolute path")
		return "", false
	case filepath.IsAbs(s):
		return filepath.Clean(s), true
	case w.dir == "":
		w.problem(n, p, ErrValue, "relative bind source %s needs the project directory, and this stack was given without one: write an absolute path", quote(s))
		return "", false
	}
	dir, err := filepath.Abs(w.dir)
	if err != nil {
		w.problem(n, p, ErrValue, "relative bind source %s: project directory: %v", quote(s), err)
		return "", false
	}
	return filepath.Join(dir, s), true
}

// mountTarget checks a target: absolute, clean, not "/".
func (w *walker) mountTarget(n *yaml.Node, p, t string) bool {
	if msg := targetProblem(t); msg != "" {
		w.problem(n, p, ErrValue, "%s", msg)
		return false
	}
	return true
}

func targetProblem(t string) string {
	switch {
	case !validAbsPath(t):
		return "target " + quote(t) + ": want a clean absolute path (no '..', no '//', no trailing '/')"
	case t == "/":
		return "target /: mounting over the root is not supported"
	}
	return ""
}

func anonymousProblem(target string) string {
	return "an anonymous volume (" + quote(target) + " alone) is not supported: name it, NAME:" + target + ", and declare NAME under the top-level volumes"
}

// validVolumeKey is Compose's volume key, [a-zA-Z0-9][a-zA-Z0-9._-]*,
// capped at 63 so STACK_KEY stays a short file name.
func validVolumeKey(s string) bool {
	return len(s) <= 63 && drivers.ValidVolumeName(s)
}

func volumeNameProblem(s string) string {
	return "volume name " + quote(s) + ": want letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128 characters (it names a directory and an incus volume)"
}

// volumes checks the top-level volumes and every service's mounts: a
// named volume is declared, names are safe for a file and an incus
// volume (SEC-3), targets are clean, absolute and given once.
func (c *checker) volumes(st *Stack) {
	for _, key := range sortedKeys(st.Volumes) {
		if v := st.Volumes[key]; !drivers.ValidVolumeName(v.Name) {
			c.add("volumes."+key+".name", ErrValue, "%s", volumeNameProblem(v.Name))
		}
	}
	for _, name := range sortedKeys(st.Services) {
		svc := st.Services[name]
		targets := map[string]int{}
		for i, m := range svc.Volumes {
			p := index("services."+name+".volumes", i)
			if msg := targetProblem(m.Target); msg != "" {
				c.add(p, ErrValue, "%s", msg)
			} else if first, dup := targets[m.Target]; dup {
				c.add(p, ErrValue, "target %s is mounted twice (first at volumes[%d])", m.Target, first)
			} else {
				targets[m.Target] = i
			}
			switch m.Type {
			case drivers.MountVolume:
				c.volumeMount(p, st, m)
			case drivers.MountBind:
				if !validAbsPath(m.Source) {
					c.add(p, ErrValue, "bind source %s: want a clean absolute path", quote(m.Source))
				}
			default:
				c.add(p, ErrValue, "type %s: want volume or bind", quote(m.Type))
			}
		}
	}
}

func (c *checker) volumeMount(p string, st *Stack, m VolumeMount) {
	v, ok := st.Volumes[m.Volume]
	switch {
	case !ok:
		c.add(p, ErrValue, "volume %s is not declared under the top-level volumes (add volumes: {%s: {}})", quote(m.Volume), m.Volume)
	case m.Source != v.Name:
		c.add(p, ErrValue, "source %s is not volume %s's name %s", quote(m.Source), quote(m.Volume), quote(v.Name))
	case m.External != v.External:
		c.add(p, ErrValue, "volume %s: external is %t here and %t at the top level", quote(m.Volume), m.External, v.External)
	}
}

// VolumeNames are the node-wide names of the stack's named volumes that
// engenho made and may delete (`engenho remove --volumes`): external ones
// are left out. Sorted.
func (st *Stack) VolumeNames() []string {
	var out []string
	for _, key := range sortedKeys(st.Volumes) {
		if v := st.Volumes[key]; !v.External && v.Name != "" {
			out = append(out, v.Name)
		}
	}
	return out
}
