package daemon

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/runtime/control"
)

// `engenho remove STACK --volumes` (issue 15): the stack's named volumes
// are deleted once its instances are gone, that is when the tree reports
// the stack gone (OnStackGone), through each driver's drivers.Volumes.
// External volumes are never deleted, and a removal without --volumes
// keeps every volume. The request waits for the deletion and answers with
// what was deleted. The wish lives in memory only: a daemon restarted
// before the stack is gone keeps the volumes (the safe side).

// volumeDeleteTimeout bounds the deletion of one volume.
const volumeDeleteTimeout = 2 * time.Minute

// volumeRemovals are the remove --volumes requests waiting for their
// stack to be gone.
type volumeRemovals struct {
	mu      sync.Mutex
	pending map[string][]*volumeRemoval
}

// volumeRemoval is one request: the volumes to delete, and its outcome
// once done is closed.
type volumeRemoval struct {
	vols    []stackVolume
	done    chan struct{}
	deleted []string
	err     error
}

// stackVolume is a named volume and the driver that keeps it.
type stackVolume struct{ driver, name string }

// removeVolumesWhenGone registers the deletion of stack's volumes for
// when the stack is gone; call it before Remove, so a stack that goes at
// once is not missed.
func (d *Deployer) removeVolumesWhenGone(stack string) (*volumeRemoval, error) {
	vols, err := d.stackVolumes(stack)
	if err != nil {
		return nil, err
	}
	r := &volumeRemoval{vols: vols, done: make(chan struct{})}
	d.removals.mu.Lock()
	defer d.removals.mu.Unlock()
	if d.removals.pending == nil {
		d.removals.pending = map[string][]*volumeRemoval{}
	}
	d.removals.pending[stack] = append(d.removals.pending[stack], r)
	return r, nil
}

// dropVolumeRemoval forgets r (its Remove failed).
func (d *Deployer) dropVolumeRemoval(stack string, r *volumeRemoval) {
	d.removals.mu.Lock()
	defer d.removals.mu.Unlock()
	rs := d.removals.pending[stack]
	for i, x := range rs {
		if x == r {
			d.removals.pending[stack] = append(rs[:i:i], rs[i+1:]...)
			break
		}
	}
	if len(d.removals.pending[stack]) == 0 {
		delete(d.removals.pending, stack)
	}
}

// stackVolumes are the named volumes of stack's current definition that
// engenho made (not external), each with the driver of every service
// that mounts it, sorted.
func (d *Deployer) stackVolumes(stack string) ([]stackVolume, error) {
	d.mu.Lock()
	cur, err := d.mustCurrent(stack)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	def, err := stackfile.Unmarshal(cur.Current.Definition, d.key)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", stack, err)
	}
	ours := map[string]bool{}
	for _, name := range def.VolumeNames() {
		ours[name] = true
	}
	seen := map[stackVolume]bool{}
	var out []stackVolume
	for _, svc := range def.Services {
		for _, m := range svc.Volumes {
			v := stackVolume{driver: svc.Driver, name: m.Source}
			if m.Type == drivers.MountVolume && ours[m.Source] && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].name < out[j].name || out[i].name == out[j].name && out[i].driver < out[j].driver
	})
	return out, nil
}

// stackGone runs the deletions waiting for stack, off the caller's
// goroutine (the tree's).
func (d *Deployer) stackGone(stack string, drvs map[string]drivers.Driver) {
	d.removals.mu.Lock()
	rs := d.removals.pending[stack]
	delete(d.removals.pending, stack)
	d.removals.mu.Unlock()
	for _, r := range rs {
		go func() {
			r.deleted, r.err = deleteVolumes(r.vols, drvs)
			close(r.done)
		}()
	}
}

// deleteVolumes deletes vols, each through its driver; it goes on after
// a failure and reports every one.
func deleteVolumes(vols []stackVolume, drvs map[string]drivers.Driver) ([]string, error) {
	var (
		deleted []string
		errs    []error
	)
	for _, v := range vols {
		vd, ok := drvs[v.driver].(drivers.Volumes)
		if !ok {
			errs = append(errs, fmt.Errorf("volume %s: driver %s keeps no volumes here", v.name, v.driver))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), volumeDeleteTimeout)
		err := vd.DeleteVolume(ctx, v.name)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", v.name, err))
			continue
		}
		deleted = append(deleted, v.name)
	}
	return deleted, errors.Join(errs...)
}

// awaitVolumes waits for r's deletion and adds what it deleted to res.
func awaitVolumes(ctx context.Context, r *volumeRemoval, res *control.ChangeResult) error {
	select {
	case <-r.done:
	case <-ctx.Done():
		return control.Errorf(control.CodeCancelled, "stack %s is being removed; its volumes are deleted once it is gone", res.Stack)
	}
	res.VolumesDeleted = r.deleted
	if r.err != nil {
		return control.Errorf(control.CodeInternal, "stack %s removed, but: %v", res.Stack, r.err)
	}
	return nil
}
