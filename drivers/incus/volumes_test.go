package incus

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
)

// Compose `volumes:` on the incus driver: the mounts' shape is checked
// before anything is created.
func TestCheckMounts(t *testing.T) {
	vol := func(src, target string) drivers.Mount {
		return drivers.Mount{Type: drivers.MountVolume, Source: src, Target: target}
	}
	bind := func(src, target string) drivers.Mount {
		return drivers.Mount{Type: drivers.MountBind, Source: src, Target: target}
	}
	for _, c := range []struct {
		what    string
		mounts  []drivers.Mount
		secrets bool
		ok      bool
	}{
		{"named volume and bind", []drivers.Mount{vol("web_data", "/data"), bind("/etc/hosts", "/etc/hosts2")}, false, true},
		{"Compose STACK_NAME", []drivers.Mount{vol("my-app_db.data", "/var/lib/db")}, false, true},
		{"relative target", []drivers.Mount{vol("v", "data")}, false, false},
		{"unclean target", []drivers.Mount{vol("v", "/data/../etc")}, false, false},
		{"root target", []drivers.Mount{vol("v", "/")}, false, false},
		{"target twice", []drivers.Mount{vol("v", "/d"), bind("/tmp", "/d")}, false, false},
		{"driver's state dir", []drivers.Mount{vol("v", stateDir)}, false, false},
		{"inside the secrets dir", []drivers.Mount{vol("v", "/run/secrets/x")}, false, false},
		{"over /run with secrets", []drivers.Mount{vol("v", "/run")}, true, false},
		{"over /run without secrets", []drivers.Mount{vol("v", "/run")}, false, true},
		{"volume name with a slash", []drivers.Mount{vol("a/b", "/d")}, false, false},
		{"volume name starting with '-'", []drivers.Mount{vol("-a", "/d")}, false, false},
		{"volume name too long", []drivers.Mount{vol(strings.Repeat("a", 64), "/d")}, false, false},
		{"empty volume name", []drivers.Mount{vol("", "/d")}, false, false},
		{"relative bind source", []drivers.Mount{bind("./conf", "/conf")}, false, false},
		{"unknown type", []drivers.Mount{{Type: "tmpfs", Target: "/t"}}, false, false},
	} {
		spec := drivers.Spec{Name: "a", Image: "b", Mounts: c.mounts}
		if c.secrets {
			spec.Secrets = []drivers.SecretFile{{Name: "s", Value: "v"}}
		}
		err := checkSpecFields(spec, true)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, drivers.ErrInvalid) {
			t.Errorf("%s: %v, want ok=%v (else ErrInvalid)", c.what, err, c.ok)
		}
	}
}

// Each mount's disk device is named from its target: stable, unique per
// target, within incus's device name rules.
func TestMountDeviceNames(t *testing.T) {
	targets := []string{"/data", "/var/lib/data", "/var-lib/data", "/var/lib-data", "/A/B", "/a/b", "/" + strings.Repeat("x", 200)}
	seen := map[string]string{}
	for _, target := range targets {
		n := mountDevice(target)
		if n != mountDevice(target) {
			t.Errorf("%s: device name not stable", target)
		}
		if other, dup := seen[n]; dup {
			t.Errorf("%s and %s share device %s", target, other, n)
		}
		seen[n] = target
		if len(n) > 63 || !strings.HasPrefix(n, mountPrefix) || strings.ContainsAny(n, "/ .") {
			t.Errorf("%s: device name %q", target, n)
		}
	}
	if got := mountDevice("/var/lib/data"); !strings.HasPrefix(got, mountPrefix+"var-lib-data-") {
		t.Errorf("device of /var/lib/data = %q, want it to read as the path", got)
	}
}

// The devices of the create request: a volume names its pool, a bind its
// host path (shifted where idmapped mounts exist), ro is readonly.
func TestMountDevices(t *testing.T) {
	spec := drivers.Spec{Mounts: []drivers.Mount{
		{Type: drivers.MountVolume, Source: "s_v", Target: "/v", ReadOnly: true},
		{Type: drivers.MountBind, Source: "/srv/conf", Target: "/conf"},
	}}
	for _, idmapped := range []bool{true, false} {
		d := &Driver{idmapped: idmapped}
		devs := d.mountDevices(spec, "pool1")
		v := devs[mountDevice("/v")]
		if v["type"] != "disk" || v["pool"] != "pool1" || v["source"] != "s_v" || v["path"] != "/v" || v["readonly"] != "true" {
			t.Errorf("volume device %v", v)
		}
		b := devs[mountDevice("/conf")]
		if b["type"] != "disk" || b["source"] != "/srv/conf" || b["path"] != "/conf" || b["pool"] != "" || b["readonly"] != "" {
			t.Errorf("bind device %v", b)
		}
		if want := map[bool]string{true: "true"}[idmapped]; b["shift"] != want {
			t.Errorf("idmapped %v: shift = %q, want %q", idmapped, b["shift"], want)
		}
	}
}

func TestVolumeUsers(t *testing.T) {
	got := volumeUsers([]string{"/1.0/instances/web-1?project=p", "/1.0/profiles/x"})
	if want := []string{"instance web-1", "profile x"}; !slices.Equal(got, want) {
		t.Errorf("volumeUsers = %v, want %v", got, want)
	}
}

// runToEnd starts name and waits until its command has ended; it returns
// the exit code and the output.
func runToEnd(t *testing.T, d *Driver, name string) (int, string) {
	t.Helper()
	ctx := testCtx(t)
	if err := d.Start(ctx, name); err != nil {
		t.Fatalf("Start %s: %v", name, err)
	}
	st := waitState(t, d, name, drivers.StateStopped)
	rc, err := d.Logs(ctx, name, drivers.LogOptions{})
	if err != nil {
		t.Fatalf("Logs %s: %v", name, err)
	}
	defer rc.Close()
	out, _ := io.ReadAll(rc)
	return st.ExitCode, string(out)
}

func deleteVolumeAtEnd(t *testing.T, d *Driver, vol string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.DeleteVolume(ctx, vol); err != nil {
			t.Errorf("cleanup: DeleteVolume %s: %v", vol, err)
		}
	})
}

// Named volumes are incus custom volumes: created on first use, their data
// survives the instance's delete and a new instance sees it; ro is
// read-only inside; ListVolumes shows only the driver's; DeleteVolume
// refuses a volume an instance uses (naming it), then deletes it.
func TestNamedVolumes(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	vol := uniqueName("vol")
	deleteVolumeAtEnd(t, d, vol)
	mount := []drivers.Mount{{Type: drivers.MountVolume, Source: vol, Target: "/data"}}

	first := shSpec(uniqueName("volw"), "echo kept >/data/f && echo written", nil)
	first.Mounts = mount
	create(t, d, first)
	if code, out := runToEnd(t, d, first.Name); code != 0 {
		t.Fatalf("writer exited %d: %s", code, out)
	}
	if err := d.Delete(ctx, first.Name); err != nil {
		t.Fatalf("Delete writer: %v", err)
	}
	if got, err := d.ListVolumes(ctx, vol); err != nil || !slices.Equal(got, []string{vol}) {
		t.Fatalf("ListVolumes(%q) = %v, %v; want [%s]", vol, got, err, vol)
	}

	ro := shSpec(uniqueName("volr"), `[ "$(cat /data/f)" = kept ] || exit 3; if echo x >/data/g; then exit 4; fi; echo ro-ok`, nil)
	ro.Mounts = []drivers.Mount{{Type: drivers.MountVolume, Source: vol, Target: "/data", ReadOnly: true}}
	create(t, d, ro)
	if code, out := runToEnd(t, d, ro.Name); code != 0 || !strings.Contains(out, "ro-ok") {
		t.Fatalf("reader exited %d (3: data lost, 4: ro writable): %s", code, out)
	}

	err := d.DeleteVolume(ctx, vol)
	if !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), ro.Name) {
		t.Fatalf("DeleteVolume of a volume in use: %v, want ErrInvalid naming %s", err, ro.Name)
	}
	if err := d.Delete(ctx, ro.Name); err != nil {
		t.Fatalf("Delete reader: %v", err)
	}
	if err := d.DeleteVolume(ctx, vol); err != nil {
		t.Fatalf("DeleteVolume: %v", err)
	}
	if got, err := d.ListVolumes(ctx, vol); err != nil || len(got) != 0 {
		t.Errorf("ListVolumes after DeleteVolume = %v, %v", got, err)
	}
	if err := d.DeleteVolume(ctx, vol); err != nil {
		t.Errorf("DeleteVolume of a missing volume: %v, want nil", err)
	}
}

// A custom volume made outside engenho is attached but never listed nor
// deleted by the driver.
func TestForeignVolumeLeftAlone(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	pool, err := d.volumePool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vol := uniqueName("foreign")
	if err := d.c.CreateStorageVolume(ctx, pool, StorageVolumesPost{Name: vol, Type: "custom", ContentType: "filesystem"}); err != nil {
		t.Fatalf("creating a volume by hand: %v", err)
	}
	t.Cleanup(func() { _ = d.c.DeleteStorageVolume(context.Background(), pool, vol) })
	if got, err := d.ListVolumes(ctx, vol); err != nil || len(got) != 0 {
		t.Errorf("ListVolumes shows a foreign volume: %v, %v", got, err)
	}
	if err := d.DeleteVolume(ctx, vol); !errors.Is(err, drivers.ErrInvalid) {
		t.Errorf("DeleteVolume of a foreign volume: %v, want ErrInvalid", err)
	}
	if _, err := d.c.StorageVolume(ctx, pool, vol); err != nil {
		t.Errorf("the foreign volume is gone: %v", err)
	}
}

// A bind mount shows a host directory or file; ro is read-only; where the kernel has
// idmapped mounts (shift=true) the host's root-owned file is root's inside,
// else it shows as nobody (65534). A missing source is refused at Create.
func TestBindMounts(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("from-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantUID := "65534"
	if d.idmapped {
		wantUID = "0"
	}
	script := `[ "$(cat /rw/f)" = from-host ] || exit 3; [ "$(cat /ro/f)" = from-host ] || exit 3
[ "$(cat /etc/app.conf)" = from-host ] || exit 7
if echo x >/ro/g; then exit 4; fi
echo uid=$(stat -c %u /ro/f)
[ "$(stat -c %u /ro/f)" = ` + wantUID + ` ] || exit 5
`
	if d.idmapped { // unshifted, the host's root-owned directory is not the container root's
		script += "echo back >/rw/back || exit 6\n"
	}
	script += "echo bind-ok"
	spec := shSpec(uniqueName("bind"), script, nil)
	spec.Mounts = []drivers.Mount{
		{Type: drivers.MountBind, Source: dir, Target: "/rw"},
		{Type: drivers.MountBind, Source: dir, Target: "/ro", ReadOnly: true},
		{Type: drivers.MountBind, Source: filepath.Join(dir, "f"), Target: "/etc/app.conf", ReadOnly: true}, // a file, as compose files bind configs
	}
	create(t, d, spec)
	code, out := runToEnd(t, d, spec.Name)
	if code != 0 || !strings.Contains(out, "bind-ok") {
		t.Fatalf("exited %d (3: content, 4: ro writable, 5: owner, want uid %s; 6: rw not writable, 7: file bind): %s", code, wantUID, out)
	}
	if d.idmapped {
		if b, err := os.ReadFile(filepath.Join(dir, "back")); err != nil || string(b) != "back\n" {
			t.Errorf("the container's write through the bind: %q, %v", b, err)
		}
	}
	t.Logf("idmapped mounts: %v; %s", d.idmapped, strings.TrimSpace(out))

	missing := shSpec(uniqueName("bindx"), "true", nil)
	missing.Mounts = []drivers.Mount{{Type: drivers.MountBind, Source: filepath.Join(dir, "nope"), Target: "/x"}}
	if err := d.Create(ctx, missing); !errors.Is(err, drivers.ErrInvalid) {
		cleanup(t, d, missing.Name)
		t.Errorf("Create with a missing bind source: %v, want ErrInvalid", err)
	}
}
