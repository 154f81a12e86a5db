package incus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/engenho/engenho/drivers"
)

// Named volumes (drivers.MountVolume) are incus custom storage volumes in
// the pool of the instances' root disk (Options.StoragePool, else the
// profiles' root disk), named as the mount's Source. The driver marks the
// volumes it creates with volumeMark and lists and deletes only those; a
// custom volume of that name that exists without the mark (made by hand) is
// attached but never deleted. Each mount is a disk device of the
// instance's create request, named from its target (mountDevice).
const (
	// volumeMark is the config key on a custom volume the driver created.
	volumeMark = "user.engenho.volume"
	// mountPrefix begins the name of every mount's disk device.
	mountPrefix = "engenho-mnt-"
)

// StorageVolume is one entry of GET /1.0/storage-pools/POOL/volumes.
type StorageVolume struct {
	Name        string            `json:"name"`
	Type        string            `json:"type"`
	ContentType string            `json:"content_type"`
	Config      map[string]string `json:"config"`
	UsedBy      []string          `json:"used_by"`
}

// StorageVolumesPost is POST /1.0/storage-pools/POOL/volumes/custom.
type StorageVolumesPost struct {
	Name        string            `json:"name"`
	Type        string            `json:"type"`
	ContentType string            `json:"content_type"`
	Config      map[string]string `json:"config,omitempty"`
}

func customVolumePath(pool, name string) string {
	p := "/1.0/storage-pools/" + url.PathEscape(pool) + "/volumes/custom"
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

// StorageVolume returns one custom volume of pool.
func (c *Client) StorageVolume(ctx context.Context, pool, name string) (StorageVolume, error) {
	var v StorageVolume
	err := c.get(ctx, customVolumePath(pool, name), nil, &v)
	return v, err
}

// StorageVolumes lists pool's custom volumes with their config.
func (c *Client) StorageVolumes(ctx context.Context, pool string) ([]StorageVolume, error) {
	var list []StorageVolume
	err := c.get(ctx, customVolumePath(pool, ""), url.Values{"recursion": {"1"}}, &list)
	return list, err
}

// CreateStorageVolume creates a custom volume (incusd answers at once or
// with an operation, which is waited for).
func (c *Client) CreateStorageVolume(ctx context.Context, pool string, post StorageVolumesPost) error {
	return c.syncOrAsync(ctx, request{method: http.MethodPost, path: customVolumePath(pool, ""), body: post}, "create volume "+post.Name)
}

// DeleteStorageVolume deletes a custom volume.
func (c *Client) DeleteStorageVolume(ctx context.Context, pool, name string) error {
	return c.syncOrAsync(ctx, request{method: http.MethodDelete, path: customVolumePath(pool, name)}, "delete volume "+name)
}

func (c *Client) syncOrAsync(ctx context.Context, r request, what string) error {
	env, err := c.call(ctx, r)
	if err != nil || env.Type != "async" || env.Operation == "" {
		return err
	}
	_, err = c.Wait(ctx, env.Operation, what)
	return err
}

// checkMounts checks the mounts' shape: types, absolute clean targets,
// each target once and none on the driver's own paths, volume names incus
// takes, absolute bind sources.
func checkMounts(spec drivers.Spec, bad func(string, ...any) error) error {
	if err := drivers.CheckMounts(spec.Mounts); err != nil {
		return bad("%v", err)
	}
	for _, m := range spec.Mounts {
		t := m.Target
		if under(t, stateDir) || under(t, secretsDir) || under(secretsDir, t) && len(spec.Secrets) > 0 {
			return bad("mount target %q: %s and %s are the driver's own", t, stateDir, secretsDir)
		}
		if m.Type == drivers.MountVolume {
			if err := checkVolumeName(m.Source); err != nil {
				return bad("volume %q: %v", m.Source, err)
			}
		}
	}
	return nil
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// checkVolumeName: the node-wide volume name is the incus volume's name as
// is (no mapping that two names could collide under), so it must be one
// incus takes and its CLI shows plainly: a letter or digit, then letters,
// digits, '_', '.', '-', at most 63 in all (Compose's STACK_NAME fits).
func checkVolumeName(name string) error {
	switch {
	case name == "":
		return errors.New("empty volume name")
	case len(name) > 63:
		return fmt.Errorf("at most 63 characters for an incus volume name, this one has %d", len(name))
	case !drivers.ValidVolumeName(name):
		return errors.New("want a letter or digit, then letters, digits, '_', '.' or '-'")
	}
	return nil
}

// checkBindSources checks, against a local incusd (same host), that each
// bind source exists: incusd would only fail at start.
func (d *Driver) checkBindSources(spec drivers.Spec, op string) error {
	if !d.c.local {
		return nil
	}
	for _, m := range spec.Mounts {
		if m.Type != drivers.MountBind {
			continue
		}
		if _, err := os.Stat(m.Source); err != nil {
			return drivers.Errorf(DriverName, op, spec.Name, drivers.ErrInvalid, "bind mount source %q: %v", m.Source, err)
		}
	}
	return nil
}

// mountDevice names the disk device of a mount at target: mountPrefix, the
// target's path as words (at most 30 characters), and 8 hex digits of its
// hash, so every target has its own stable, valid device name.
func mountDevice(target string) string {
	var b strings.Builder
	for _, c := range strings.Trim(target, "/") {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b.WriteRune(c)
		case c >= 'A' && c <= 'Z':
			b.WriteRune(c + 'a' - 'A')
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 30 {
			break
		}
	}
	sum := sha256.Sum256([]byte(target))
	return mountPrefix + b.String() + "-" + hex.EncodeToString(sum[:4])
}

// mountDevices are the disk devices of spec's mounts in pool. A bind is
// id-shifted (shift=true: the container's root is the host's root on
// those files, as Compose's binds are) where the kernel has idmapped
// mounts; elsewhere its files show as nobody inside.
func (d *Driver) mountDevices(spec drivers.Spec, pool string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range spec.Mounts {
		dev := map[string]string{"type": "disk", "path": m.Target}
		switch m.Type {
		case drivers.MountVolume:
			dev["pool"], dev["source"] = pool, m.Source
		case drivers.MountBind:
			dev["source"] = m.Source
			if d.idmapped {
				dev["shift"] = "true"
			}
		}
		if m.ReadOnly {
			dev["readonly"] = "true"
		}
		out[mountDevice(m.Target)] = dev
	}
	return out
}

// volumePool is the pool named volumes live in: Options.StoragePool, else
// the root disk's pool of the last profile that has one (incus applies
// profiles in order).
func (d *Driver) volumePool(ctx context.Context) (string, error) {
	if d.opts.StoragePool != "" {
		return d.opts.StoragePool, nil
	}
	pool := ""
	for _, name := range d.profiles {
		p, err := d.c.Profile(ctx, name)
		if err != nil {
			return "", err
		}
		for _, dev := range p.Devices {
			if dev["type"] == "disk" && dev["path"] == "/" && dev["pool"] != "" {
				pool = dev["pool"]
			}
		}
	}
	if pool == "" {
		return "", drivers.Errorf(DriverName, "volume pool", "", drivers.ErrInvalid, "no storage pool for volumes: none of the profiles %v has a root disk and the driver has no storage pool set", d.profiles)
	}
	return pool, nil
}

func hasVolume(spec drivers.Spec) bool {
	for _, m := range spec.Mounts {
		if m.Type == drivers.MountVolume {
			return true
		}
	}
	return false
}

// ensureVolumes creates the spec's named volumes that do not exist yet,
// marked as the driver's; existing ones are reused as they are.
func (d *Driver) ensureVolumes(ctx context.Context, spec drivers.Spec, pool string) error {
	for _, m := range spec.Mounts {
		if m.Type != drivers.MountVolume {
			continue
		}
		_, err := d.c.StorageVolume(ctx, pool, m.Source)
		if err == nil {
			continue
		}
		if !IsNotFound(err) {
			return fmt.Errorf("volume %q: %w", m.Source, err)
		}
		err = d.c.CreateStorageVolume(ctx, pool, StorageVolumesPost{
			Name: m.Source, Type: "custom", ContentType: "filesystem",
			Config: map[string]string{volumeMark: "1"},
		})
		if err != nil {
			// Another instance's Create may have made it meanwhile.
			if _, gerr := d.c.StorageVolume(ctx, pool, m.Source); gerr == nil {
				continue
			}
			return fmt.Errorf("creating volume %q in pool %q: %w", m.Source, pool, err)
		}
		d.log.Debug().Str("volume", m.Source).Str("pool", pool).Msg("created volume")
	}
	return nil
}

var _ drivers.Volumes = (*Driver)(nil)

// ListVolumes returns the names of the custom volumes the driver created
// (volumeMark) whose name starts with prefix, sorted.
func (d *Driver) ListVolumes(ctx context.Context, prefix string) ([]string, error) {
	pool, err := d.volumePool(ctx)
	if err != nil {
		return nil, d.fail("list volumes", "", err)
	}
	list, err := d.c.StorageVolumes(ctx, pool)
	if err != nil {
		return nil, d.fail("list volumes", "", err)
	}
	var out []string
	for _, v := range list {
		if v.Type == "custom" && v.Config[volumeMark] != "" && strings.HasPrefix(v.Name, prefix) {
			out = append(out, v.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeleteVolume deletes a custom volume the driver created. A missing one
// is not an error; one it did not create, or one an instance uses
// (running or not), is refused (ErrInvalid) with what uses it.
func (d *Driver) DeleteVolume(ctx context.Context, name string) error {
	const op = "delete volume"
	if err := checkVolumeName(name); err != nil {
		return drivers.Errorf(DriverName, op, "", drivers.ErrInvalid, "volume %q: %v", name, err)
	}
	pool, err := d.volumePool(ctx)
	if err != nil {
		return d.fail(op, "", err)
	}
	v, err := d.c.StorageVolume(ctx, pool, name)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return d.fail(op, "", fmt.Errorf("volume %q: %w", name, err))
	}
	if v.Config[volumeMark] == "" {
		return drivers.Errorf(DriverName, op, "", drivers.ErrInvalid, "volume %q in pool %q was not created by engenho (no %s); left alone", name, pool, volumeMark)
	}
	if users := volumeUsers(v.UsedBy); len(users) > 0 {
		return drivers.Errorf(DriverName, op, "", drivers.ErrInvalid, "volume %q is in use by %s; delete the instance first", name, strings.Join(users, ", "))
	}
	if err := d.c.DeleteStorageVolume(ctx, pool, name); err != nil && !IsNotFound(err) {
		return d.fail(op, "", fmt.Errorf("volume %q: %w", name, err))
	}
	d.log.Debug().Str("volume", name).Str("pool", pool).Msg("deleted volume")
	return nil
}

// volumeUsers turns used_by URLs (/1.0/instances/NAME?project=P) into
// "instance NAME" words.
func volumeUsers(usedBy []string) []string {
	var out []string
	for _, u := range usedBy {
		p, _, _ := strings.Cut(u, "?")
		kind, name := "", path.Base(p)
		if n, err := url.PathUnescape(name); err == nil {
			name = n
		}
		switch {
		case strings.HasPrefix(p, "/1.0/instances/"):
			kind = "instance "
		case strings.HasPrefix(p, "/1.0/profiles/"):
			kind = "profile "
		}
		out = append(out, kind+name)
	}
	slices.Sort(out)
	return out
}
