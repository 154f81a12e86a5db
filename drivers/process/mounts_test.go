package process_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounts need root")
	}
}

func mountSpec(name, script string, mounts ...drivers.Mount) drivers.Spec {
	s := shSpec(name, script, drivers.Labels{"test": "mounts"})
	s.Mounts = mounts
	return s
}

func waitExit(t *testing.T, d drivers.Driver, name string) drivers.Exit {
	t.Helper()
	ch := watchExit(t, d, name)
	return recvExit(t, ch, name)
}

// runToEnd creates and starts spec, waits for its exit and returns its
// output; the instance is deleted.
func runToEnd(t *testing.T, d drivers.Driver, spec drivers.Spec) (string, drivers.Exit) {
	t.Helper()
	mustCreate(t, d, spec)
	if err := d.Start(ctxT(t), spec.Name); err != nil {
		t.Fatalf("Start %s: %v", spec.Name, err)
	}
	e := waitExit(t, d, spec.Name)
	out := readLogs(t, d, spec.Name)
	if err := d.Delete(ctxT(t), spec.Name); err != nil {
		t.Fatalf("Delete %s: %v", spec.Name, err)
	}
	return out, e
}

func mountTable(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A named volume is DIR/volumes/NAME: what one instance writes there the
// next instance reads, after the first is deleted; the host's target
// directory never sees it; ListVolumes lists it and DeleteVolume deletes
// it once no instance mounts it.
func TestNamedVolumeOutlivesInstances(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	target := t.TempDir()
	vol := drivers.Mount{Type: drivers.MountVolume, Source: "shop_data", Target: target}

	out, e := runToEnd(t, d, mountSpec("writer", "echo kept > "+target+"/f && echo wrote", vol))
	if e.ExitCode != 0 || !strings.Contains(out, "wrote") {
		t.Fatalf("writer: exit %+v, output %q", e, out)
	}
	if _, err := os.Stat(filepath.Join(target, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the write reached the host's target directory: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "volumes", "shop_data", "f")); err != nil || string(b) != "kept\n" {
		t.Errorf("volume directory: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "volumes", "shop_data")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("volume directory mode: %v, %v", fi, err)
	}
	out, e = runToEnd(t, d, mountSpec("reader", "cat "+target+"/f", vol))
	if e.ExitCode != 0 || !strings.Contains(out, "kept") {
		t.Fatalf("reader: exit %+v, output %q", e, out)
	}

	if got, err := d.ListVolumes(ctxT(t), "shop_"); err != nil || !reflect.DeepEqual(got, []string{"shop_data"}) {
		t.Errorf("ListVolumes(shop_) = %v, %v", got, err)
	}
	if got, _ := d.ListVolumes(ctxT(t), "other_"); len(got) != 0 {
		t.Errorf("ListVolumes(other_) = %v", got)
	}
	mustCreate(t, d, mountSpec("user", "true", vol))
	if err := d.DeleteVolume(ctxT(t), "shop_data"); !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), "user") {
		t.Errorf("DeleteVolume of a mounted volume: %v", err)
	}
	if err := d.Delete(ctxT(t), "user"); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteVolume(ctxT(t), "shop_data"); err != nil {
		t.Fatalf("DeleteVolume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes", "shop_data")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume still there: %v", err)
	}
	if err := d.DeleteVolume(ctxT(t), "shop_data"); err != nil {
		t.Errorf("DeleteVolume of a missing volume: %v", err)
	}
	if err := d.DeleteVolume(ctxT(t), "../etc"); !errors.Is(err, drivers.ErrInvalid) {
		t.Errorf("DeleteVolume(../etc): %v", err)
	}
	var _ drivers.Volumes = d
}

// A bind shows the host's files at the target; read-only refuses writes;
// a read-write bind writes through to the host.
func TestBindMounts(t *testing.T) {
	needRoot(t)
	d := newDriver(t, t.TempDir())
	defer d.Close()
	src, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "hello"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	roTarget, rwTarget := t.TempDir(), t.TempDir()
	script := "cat " + roTarget + "/hello; if touch " + roTarget + "/x 2>/dev/null; then echo WRITABLE; else echo read-only; fi; echo out > " + rwTarget + "/w"
	out, e := runToEnd(t, d, mountSpec("binder", script,
		drivers.Mount{Type: drivers.MountBind, Source: src, Target: roTarget, ReadOnly: true},
		drivers.Mount{Type: drivers.MountBind, Source: rw, Target: rwTarget}))
	if e.ExitCode != 0 || !strings.Contains(out, "from the host") || !strings.Contains(out, "read-only") || strings.Contains(out, "WRITABLE") {
		t.Fatalf("exit %+v, output %q", e, out)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "w")); err != nil || string(b) != "out\n" {
		t.Errorf("write through a rw bind: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(src, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a ro bind was written: %v", err)
	}
}

// Nothing leaks out of the instance's mount namespace: the host's mount
// table is the same while it runs and after. The working directory is
// entered after the mounts, so a workload working in its target sees it.
func TestMountsStayInTheNamespace(t *testing.T) {
	needRoot(t)
	d := newDriver(t, t.TempDir())
	defer d.Close()
	src, target := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(src, "seen"), nil, 0o644)
	before := mountTable(t)
	spec := mountSpec("ns", "ls; echo up; exec sleep 3600", drivers.Mount{Type: drivers.MountBind, Source: src, Target: target})
	spec.WorkingDir = target
	mustCreate(t, d, spec)
	st := mustStart(t, d, "ns")
	out := waitLogs(t, d, "ns", "up")
	if !strings.Contains(out, "seen") {
		t.Errorf("working directory is not the mounted one: %q", out)
	}
	if got := mountTable(t); got != before {
		t.Errorf("host mount table changed while the instance runs:\nbefore\n%s\nafter\n%s", before, got)
	}
	// The workload's own table has the bind; its pid is the workload's.
	theirs, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/mountinfo")
	if err != nil || !strings.Contains(string(theirs), " "+target+" ") {
		t.Errorf("instance's mount table lacks %s: %v", target, err)
	}
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/comm"); strings.TrimSpace(string(comm)) != "sleep" {
		t.Errorf("pid %d is %q, want the workload (exec kept the pid)", st.Pid, comm)
	}
	if err := d.Kill(ctxT(t), "ns"); err != nil {
		t.Fatal(err)
	}
	if got := mountTable(t); got != before {
		t.Errorf("host mount table changed after the instance ended")
	}
}

// DRV-4 with mounts: a driver reopened on the same Dir adopts a run with
// mounts (same pid); Exec runs the probe in the instance's namespace.
func TestMountsAdoptionAndExec(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	target := t.TempDir()
	a := newDriver(t, dir)
	spec := mountSpec("adoptee", "echo inside > "+target+"/mark; echo up; exec sleep 3600",
		drivers.Mount{Type: drivers.MountVolume, Source: "t_v", Target: target})
	mustCreate(t, a, spec)
	before := mustStart(t, a, "adoptee")
	waitLogs(t, a, "adoptee", "up")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := newDriver(t, dir)
	defer b.Close()
	after, err := b.Inspect(ctxT(t), "adoptee")
	if err != nil || after.State != drivers.StateRunning || after.Pid != before.Pid {
		t.Fatalf("adopted %+v, %v; want running pid %d", after, err, before.Pid)
	}
	res, err := b.Exec(ctxT(t), "adoptee", []string{"cat", target + "/mark"})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "inside\n" {
		t.Errorf("Exec in the namespace: %+v (%q), %v", res, res.Stderr, err)
	}
	if err := b.Kill(ctxT(t), "adoptee"); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(b.DeleteVolume(ctxT(t), "t_v"), drivers.ErrInvalid) {
		t.Errorf("DeleteVolume of a volume a stopped instance mounts is not refused")
	}
}

// A volume is made for the spec's user, who can write it; the workload
// runs as that user, with the mounts made before it dropped root.
func TestVolumeForUser(t *testing.T) {
	needRoot(t)
	d := newDriver(t, t.TempDir())
	defer d.Close()
	target := t.TempDir()
	// The user must reach the target: TempDir's parent is 0700.
	if err := os.Chmod(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := mountSpec("nobody", "id -u; echo x > "+target+"/f && echo wrote",
		drivers.Mount{Type: drivers.MountVolume, Source: "t_nobody", Target: target})
	spec.User = "65534"
	out, e := runToEnd(t, d, spec)
	if e.ExitCode != 0 || !strings.Contains(out, "65534") || !strings.Contains(out, "wrote") {
		t.Fatalf("exit %+v, output %q", e, out)
	}
}

// Validate refuses, with one line that says what to do, what the driver
// cannot mount; it changes nothing on the host.
func TestValidateMounts(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	existing, file := t.TempDir(), filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	missing := filepath.Join(t.TempDir(), "missing")
	cases := []struct {
		name  string
		mount drivers.Mount
		msg   string
	}{
		{"target missing on the host", drivers.Mount{Type: drivers.MountVolume, Source: "v", Target: missing}, "creates none"},
		{"bind source missing", drivers.Mount{Type: drivers.MountBind, Source: missing, Target: existing}, "engenho creates no host path"},
		{"volume on a file", drivers.Mount{Type: drivers.MountVolume, Source: "v", Target: file}, "is not a directory"},
		{"file on a directory", drivers.Mount{Type: drivers.MountBind, Source: file, Target: existing}, "is a directory"},
		{"unsafe volume name", drivers.Mount{Type: drivers.MountVolume, Source: "../x", Target: existing}, "volume name"},
		{"relative target", drivers.Mount{Type: drivers.MountVolume, Source: "v", Target: "data"}, "clean absolute path"},
		{"root target", drivers.Mount{Type: drivers.MountBind, Source: existing, Target: "/"}, "other than /"},
		{"unknown type", drivers.Mount{Type: "tmpfs", Target: existing}, "mount type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := d.Validate(ctxT(t), mountSpec("v", "true", tc.mount))
			if !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Validate: %v, want ErrInvalid with %q", err, tc.msg)
			}
		})
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Validate made %s", missing)
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Validate made the volumes directory")
	}
}

// An external volume is never made by the driver: Validate and Start
// refuse it until it exists, then it mounts like any volume.
func TestExternalVolume(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	target := t.TempDir()
	spec := mountSpec("ext", "cat "+target+"/f", drivers.Mount{Type: drivers.MountVolume, Source: "media", Target: target, External: true})
	if err := d.Validate(ctxT(t), spec); !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), "never makes an external volume") {
		t.Fatalf("Validate of a missing external volume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes", "media")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the driver made the external volume: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "volumes", "media"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "volumes", "media", "f"), []byte("made outside\n"), 0o644)
	out, e := runToEnd(t, d, spec)
	if e.ExitCode != 0 || !strings.Contains(out, "made outside") {
		t.Errorf("exit %+v, output %q", e, out)
	}
}

// A probe of an instance with mounts and a user runs as that user, in
// the instance's namespace, in its working directory.
func TestExecWithMountsAndUser(t *testing.T) {
	needRoot(t)
	d := newDriver(t, t.TempDir())
	defer d.Close()
	target := t.TempDir()
	if err := os.Chmod(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := mountSpec("probed", "echo v > f; echo up; exec sleep 3600",
		drivers.Mount{Type: drivers.MountVolume, Source: "t_probed", Target: target})
	spec.User, spec.WorkingDir = "65534", target
	mustCreate(t, d, spec)
	mustStart(t, d, "probed")
	waitLogs(t, d, "probed", "up")
	res, err := d.Exec(ctxT(t), "probed", []string{"sh", "-c", "id -u; pwd; cat f"})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "65534\n"+target+"\nv\n" {
		t.Errorf("Exec: %+v (stdout %q, stderr %q), %v", res, res.Stdout, res.Stderr, err)
	}
	if err := d.Kill(ctxT(t), "probed"); err != nil {
		t.Fatal(err)
	}
}
