package fake

import (
	"context"
	"sort"
	"strings"

	"github.com/engenho/engenho/drivers"
)

// volumeSet is the fake's named volumes: made when an instance that
// mounts one is created, gone at DeleteVolume.
type volumeSet map[string]bool

// addVolumes records the named volumes spec mounts; d.mu must be held.
func (d *Driver) addVolumes(spec drivers.Spec) {
	for _, m := range spec.Mounts {
		if m.Type != drivers.MountVolume || m.External {
			continue // an external volume is not the driver's to make
		}
		if d.vols == nil {
			d.vols = volumeSet{}
		}
		d.vols[m.Source] = true
	}
}

// ListVolumes returns the volumes whose name starts with prefix, sorted.
func (d *Driver) ListVolumes(ctx context.Context, prefix string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name := range d.vols {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// DeleteVolume deletes a volume no instance mounts; a missing one is not
// an error.
func (d *Driver) DeleteVolume(ctx context.Context, name string) error {
	if !drivers.ValidVolumeName(name) {
		return drivers.Errorf(DriverName, "delete volume", name, drivers.ErrInvalid, "invalid volume name")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for iname, in := range d.instances {
		for _, m := range in.spec.Mounts {
			if m.Type == drivers.MountVolume && m.Source == name {
				return drivers.Errorf(DriverName, "delete volume", name, drivers.ErrInvalid, "volume is mounted by instance %s", iname)
			}
		}
	}
	delete(d.vols, name)
	return nil
}

// Mounts returns the mounts of instance name's spec (nil when unknown).
func (d *Driver) Mounts(name string) []drivers.Mount {
	d.mu.Lock()
	defer d.mu.Unlock()
	if in, ok := d.instances[name]; ok {
		return append([]drivers.Mount(nil), in.spec.Mounts...)
	}
	return nil
}

var _ drivers.Volumes = (*Driver)(nil)
