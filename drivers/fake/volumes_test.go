package fake_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/engenho/engenho/drivers"
)

// The fake records a spec's mounts and keeps its named volumes as the
// process driver does: listed by prefix, deleted only once no instance
// mounts them.
func TestFakeVolumes(t *testing.T) {
	d, _ := newFake(t)
	ctx := context.Background()
	spec := shSpec("a", "run", nil)
	spec.Mounts = []drivers.Mount{
		{Type: drivers.MountVolume, Source: "s_data", Target: "/data"},
		{Type: drivers.MountBind, Source: "/etc/ssl", Target: "/etc/ssl", ReadOnly: true},
	}
	if err := d.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got := d.Mounts("a"); !reflect.DeepEqual(got, spec.Mounts) {
		t.Errorf("Mounts = %+v", got)
	}
	if got, _ := d.ListVolumes(ctx, "s_"); !reflect.DeepEqual(got, []string{"s_data"}) {
		t.Errorf("ListVolumes = %v (a bind is no volume)", got)
	}
	if err := d.DeleteVolume(ctx, "s_data"); !errors.Is(err, drivers.ErrInvalid) {
		t.Errorf("DeleteVolume of a mounted volume: %v", err)
	}
	if err := d.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteVolume(ctx, "s_data"); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.ListVolumes(ctx, ""); len(got) != 0 {
		t.Errorf("after DeleteVolume: %v", got)
	}
}
