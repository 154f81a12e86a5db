package incus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testImage is the alias setup.sh imports.
const testImage = "busybox"

// needIncus returns a driver on the local incusd, or skips (fails under
// ENGENHO_REQUIRE=incus) with the reason it is unavailable. The driver is
// closed when t ends. Other packages' incus tests wait while t runs.
func needIncus(t *testing.T) *Driver {
	t.Helper()
	drivertest.LockIncus(t)
	d, err := New(Options{PollInterval: 50 * time.Millisecond})
	if err != nil {
		drivertest.Need(t, "incus", false, err.Error())
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Client().ImageAlias(ctx, testImage); err != nil {
		d.Close()
		drivertest.Need(t, "incus", false, fmt.Sprintf("image alias %q missing (%v); run bash drivers/incus/setup.sh", testImage, err))
		return nil
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// uniqueName is a fresh instance name for tag.
func uniqueName(tag string) string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "it-" + tag + "-" + hex.EncodeToString(b[:])
}

// create makes a container running script and deletes it when t ends,
// even after a failure.
func create(t *testing.T, d *Driver, spec drivers.Spec) string {
	t.Helper()
	ctx := testCtx(t)
	if err := d.Create(ctx, spec); err != nil {
		t.Fatalf("Create %s: %v", spec.Name, err)
	}
	t.Cleanup(func() { cleanup(t, d, spec.Name) })
	return spec.Name
}

func cleanup(t *testing.T, d *Driver, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := d.Kill(ctx, name); err != nil && !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("cleanup: Kill %s: %v", name, err)
	}
	if err := d.Delete(ctx, name); err != nil && !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("cleanup: Delete %s: %v", name, err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func shSpec(name, script string, labels drivers.Labels) drivers.Spec {
	return drivers.Spec{Name: name, Image: testImage, Command: []string{"sh", "-c", script}, Labels: labels}
}

// eventually polls cond every 20ms for up to a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitState(t *testing.T, d *Driver, name string, want drivers.State) drivers.Status {
	t.Helper()
	var st drivers.Status
	eventually(t, name+" "+string(want), func() bool {
		var err error
		st, err = d.Inspect(testCtx(t), name)
		if err != nil {
			t.Fatalf("Inspect %s: %v", name, err)
		}
		return st.State == want
	})
	return st
}

// DRV-2: the incus driver passes the shared conformance suite; its harness
// runs the suite's sh script as the command of a busybox container.
//
// Not parallel with the other incus tests: the suite runs a dozen
// containers at once already, and incusd on a loaded 2-core machine takes
// seconds per operation then.
func TestConformance(t *testing.T) {
	d := needIncus(t)
	drivertest.Run(t, drivertest.Harness{
		Driver: d,
		Spec: func(name, script string, labels drivers.Labels) drivers.Spec {
			return shSpec(name, script, labels)
		},
		// Only turns a hang into a failure; a loaded machine needs room.
		Timeout: 2 * time.Minute,
		Prefix:  "dti",
	})
}

// DRV-5: create, start, stop, delete, with labels stored as user.* keys.
func TestLifecycleAndLabels(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	name := uniqueName("life")
	labels := drivers.Labels{drivers.LabelStack: "demo", drivers.LabelService: "web", drivers.LabelSlot: "0"}
	create(t, d, shSpec(name, "echo up; sleep 3600", labels))

	in, err := d.Client().Instance(ctx, name)
	if err != nil {
		t.Fatalf("client Instance: %v", err)
	}
	if in.Config["user.engenho.stack"] != "demo" {
		t.Errorf("config user.engenho.stack = %q, want demo (config %v)", in.Config["user.engenho.stack"], in.Config)
	}
	if err := d.Start(ctx, name); err != nil {
		t.Fatalf("Start: %v", err)
	}
	st := waitState(t, d, name, drivers.StateRunning)
	if st.Pid <= 0 || st.StartedAt.IsZero() {
		t.Errorf("running: pid %d started %v", st.Pid, st.StartedAt)
	}
	for k, v := range labels {
		if st.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, st.Labels[k], v)
		}
	}
	if err := d.Stop(ctx, name, 2*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	st = waitState(t, d, name, drivers.StateStopped)
	if st.ExitCode != -1 || st.Pid != 0 || !st.StartedAt.IsZero() {
		t.Errorf("stopped by SIGTERM: code %d pid %d started %v, want -1, 0, zero", st.ExitCode, st.Pid, st.StartedAt)
	}
	if err := d.Delete(ctx, name); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := d.Inspect(ctx, name); !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("Inspect after Delete: %v, want ErrNotFound", err)
	}
}

// DRV-5: List by labels uses a server-side filter on user.* keys and is
// exact; a selector value the filter cannot carry is still honoured.
func TestListByLabels(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	run := uniqueName("list")
	a := create(t, d, shSpec(uniqueName("la"), "sleep 3600", drivers.Labels{"t.run": run, "t.role": "a", "t.odd": `say "hi" there`}))
	b := create(t, d, shSpec(uniqueName("lb"), "sleep 3600", drivers.Labels{"t.run": run, "t.role": "b", "t.empty": ""}))
	for _, c := range []struct {
		sel  drivers.Labels
		want []string
	}{
		{drivers.Labels{"t.run": run}, []string{a, b}},
		{drivers.Labels{"t.run": run, "t.role": "b"}, []string{b}},
		{drivers.Labels{"t.run": run, "t.odd": `say "hi" there`}, []string{a}},
		{drivers.Labels{"t.run": run, "t.odd": `say`}, nil},
		// incus drops empty values: a missing label reads as "".
		{drivers.Labels{"t.run": run, "t.role": "b", "t.empty": ""}, []string{b}},
	} {
		got, err := d.List(ctx, c.sel)
		if err != nil {
			t.Fatalf("List %v: %v", c.sel, err)
		}
		var names []string
		for _, st := range got {
			names = append(names, st.Name)
		}
		if fmt.Sprint(sorted(names)) != fmt.Sprint(sorted(c.want)) {
			t.Errorf("List %v: got %v, want %v", c.sel, names, c.want)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// DRV-5: exec with record-output returns exit codes and both outputs;
// the recorded output files are removed afterwards.
func TestExecProbe(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	// With resource limits too, to prove incusd takes the keys as written.
	name := create(t, d, drivers.Spec{Name: uniqueName("exec"), Image: testImage,
		Command: []string{"sh", "-c", "sleep 3600"}, Env: map[string]string{"GREETING": "hello there"},
		Resources: drivers.Resources{CPUs: 0.5, MemoryBytes: 64 << 20}})
	if err := d.Start(ctx, name); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitState(t, d, name, drivers.StateRunning)
	// On this cgroup v1 host the limits land in the container's cgroups.
	if b, err := os.ReadFile("/sys/fs/cgroup/memory/lxc.payload." + name + "/memory.limit_in_bytes"); err == nil {
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(64<<20) {
			t.Errorf("memory limit %s, want %d", got, 64<<20)
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu/lxc.payload." + name + "/cpu.cfs_quota_us"); err == nil {
		if got := strings.TrimSpace(string(b)); got != "50000" {
			t.Errorf("cpu quota %s, want 50000 (0.5 CPU)", got)
		}
	}
	for _, c := range []struct {
		argv           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"true"}, 0, "", ""},
		{[]string{"sh", "-c", "echo $GREETING; echo oops >&2; exit 9"}, 9, "hello there\n", "oops\n"},
		{[]string{"sh", "-c", "ip -o link show lo | grep -q UP"}, 0, "", ""},
		{[]string{"/no/such/binary"}, 127, "", ""},
	} {
		res, err := d.Exec(ctx, name, c.argv)
		if err != nil {
			t.Errorf("Exec %v: %v", c.argv, err)
			continue
		}
		if res.ExitCode != c.code || string(res.Stdout) != c.stdout || (c.stderr != "" && string(res.Stderr) != c.stderr) {
			t.Errorf("Exec %v: got code %d stdout %q stderr %q, want %d %q %q", c.argv, res.ExitCode, res.Stdout, res.Stderr, c.code, c.stdout, c.stderr)
		}
	}
	var left []string
	if err := d.Client().get(ctx, instancePath(name, "logs", "exec-output"), nil, &left); err != nil {
		t.Fatalf("listing exec-output: %v", err)
	}
	if len(left) != 0 {
		t.Errorf("exec-output files left behind: %v", left)
	}
}

// DRV-5: Logs returns the command's output while it runs and after; the
// incus-specific instance log (lxc.log) is reachable through the client.
func TestLogs(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	name := create(t, d, shSpec(uniqueName("logs"), "echo one; echo two >&2; echo three; exit 5", nil))
	if err := d.Start(ctx, name); err != nil {
		t.Fatalf("Start: %v", err)
	}
	st := waitState(t, d, name, drivers.StateStopped)
	if st.ExitCode != 5 {
		t.Errorf("exit code %d, want 5", st.ExitCode)
	}
	rc, err := d.Logs(ctx, name, drivers.LogOptions{})
	if err != nil {
		t.Fatalf("Logs: %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "one\ntwo\nthree\n" {
		t.Errorf("Logs: %q, want one two three in order", b)
	}
	files, err := d.Client().InstanceLogs(ctx, name)
	if err != nil || len(files) == 0 {
		t.Fatalf("InstanceLogs: %v %v", files, err)
	}
	if _, err := d.Client().InstanceLog(ctx, name, "lxc.log"); err != nil {
		t.Errorf("InstanceLog lxc.log: %v", err)
	}
}

// DRV-6: a published port is a proxy device on host loopback reaching a
// server that listens on the container's loopback (which the entrypoint
// brought up, DRV-7).
func TestProxyDeviceReachesWorkload(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	port := freePort(t)
	name := create(t, d, drivers.Spec{
		Name: uniqueName("port"), Image: testImage,
		Command: []string{"sh", "-c", "mkdir -p /www && echo hello-from-incus > /www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www"},
		Ports:   []drivers.Port{{Target: 8080, HostPort: port, Protocol: "tcp"}},
	})
	if err := d.Start(ctx, name); err != nil {
		t.Fatalf("Start: %v", err)
	}
	st := waitState(t, d, name, drivers.StateRunning)
	addr := st.Addresses[8080]
	if addr != "127.0.0.1:"+strconv.Itoa(port) {
		t.Fatalf("Addresses[8080] = %q, want 127.0.0.1:%d", addr, port)
	}
	var body string
	eventually(t, "an answer through the proxy device", func() bool {
		body = httpGet(addr)
		return strings.Contains(body, "hello-from-incus")
	})

	// A proxy device added later through the client shows in Addresses.
	port2 := freePort(t)
	dev := ProxyDevice(fmt.Sprintf("tcp:127.0.0.1:%d", port2), "tcp:127.0.0.1:8080")
	if err := d.Client().PatchInstance(ctx, name, nil, map[string]map[string]string{portPrefix + "9090": dev}); err != nil {
		t.Fatalf("PatchInstance: %v", err)
	}
	if st, err := d.Inspect(ctx, name); err != nil || st.Addresses[9090] != fmt.Sprintf("127.0.0.1:%d", port2) {
		t.Errorf("after adding a proxy device: %v %v", st.Addresses, err)
	}
	eventually(t, "an answer through the added proxy device", func() bool {
		return strings.Contains(httpGet(fmt.Sprintf("127.0.0.1:%d", port2)), "hello-from-incus")
	})
}

// httpGet sends a bare HTTP/1.0 GET and returns the answer ("" on error).
func httpGet(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return ""
	}
	b, _ := io.ReadAll(conn)
	return string(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// CHS-2, DRV-5: killing the container's init from the host (kill -9 of
// Status.Pid) is seen as the instance stopping, by Inspect and by Watch.
func TestKillInitFromHost(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	name := create(t, d, shSpec(uniqueName("kill"), "echo up; sleep 3600", nil))
	if err := d.Start(ctx, name); err != nil {
		t.Fatalf("Start: %v", err)
	}
	st := waitState(t, d, name, drivers.StateRunning)
	fired := make(chan drivers.Exit, 1)
	stop, err := d.Watch(name, func(e drivers.Exit) { fired <- e })
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer stop()
	if err := exec.Command("kill", "-9", strconv.Itoa(st.Pid)).Run(); err != nil {
		t.Fatalf("kill -9 %d: %v", st.Pid, err)
	}
	select {
	case e := <-fired:
		if e.Name != name || e.ExitCode != -1 || e.Signal != "killed" {
			t.Errorf("exit %+v, want %s killed (-1)", e, name)
		}
	case <-time.After(time.Minute):
		t.Fatal("Watch did not fire after kill -9 of init")
	}
	st = waitState(t, d, name, drivers.StateStopped)
	if st.ExitCode != -1 {
		t.Errorf("ExitCode after kill -9: %d, want -1", st.ExitCode)
	}
}

// DRV-5: an absent incusd is a transient error naming the socket and how
// to start incusd.
func TestIncusdAbsent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "no-incusd.socket")
	_, err := New(Options{Socket: sock})
	if !errors.Is(err, drivers.ErrTransient) {
		t.Fatalf("New on a missing socket: %v, want ErrTransient", err)
	}
	for _, want := range []string{sock, "/usr/libexec/incus/incusd --group root"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// A socket file nobody listens on: connection refused, same kind.
	l, lerr := net.Listen("unix", sock)
	if lerr != nil {
		t.Fatal(lerr)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("stale socket file: %v", err)
	}
	if _, err := New(Options{Socket: sock}); !errors.Is(err, drivers.ErrTransient) || !strings.Contains(err.Error(), sock) {
		t.Errorf("New on a refused socket: %v, want ErrTransient naming it", err)
	}
}

// DRV-5, SVC-2: an unknown image alias is invalid, named in the error,
// and nothing is created.
func TestUnknownImage(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	spec := shSpec(uniqueName("img"), "true", nil)
	spec.Image = "no-such-image-" + spec.Name
	for what, err := range map[string]error{"Validate": d.Validate(ctx, spec), "Create": d.Create(ctx, spec)} {
		if !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), spec.Image) {
			t.Errorf("%s with an unknown alias: %v, want ErrInvalid naming %q", what, err, spec.Image)
		}
	}
	if _, err := d.Inspect(ctx, spec.Name); !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("refused Create left something: %v", err)
	}
}

// DRV-5: a storage pool that does not exist is invalid at New, named.
func TestMissingStoragePool(t *testing.T) {
	needIncus(t)
	_, err := New(Options{StoragePool: "no-such-pool"})
	if !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), `"no-such-pool"`) {
		t.Fatalf("New with a missing pool: %v, want ErrInvalid naming it", err)
	}
	d, err := New(Options{StoragePool: "default"})
	if err != nil {
		t.Fatalf("New with the default pool: %v", err)
	}
	defer d.Close()
	if err := d.Validate(testCtx(t), shSpec(uniqueName("pool"), "true", nil)); err != nil {
		t.Errorf("Validate with the default pool: %v", err)
	}
}

// DRV-5: a profile that does not exist fails Validate, named.
func TestMissingProfile(t *testing.T) {
	needIncus(t)
	d, err := New(Options{Profiles: []string{"default", "no-such-profile"}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer d.Close()
	err = d.Validate(testCtx(t), shSpec(uniqueName("prof"), "true", nil))
	if !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), "no-such-profile") {
		t.Errorf("Validate with a missing profile: %v, want ErrInvalid naming it", err)
	}
}

// DRV-5: after the init ends, incusd runs its stop hook for a while and
// meanwhile reports the instance Running and refuses start and delete; a
// Delete right after Stop, and a Start right after the command exited,
// still succeed (the driver waits the hook out).
func TestStopHookWindow(t *testing.T) {
	t.Parallel()
	d := needIncus(t)
	ctx := testCtx(t)
	for i := range 3 {
		name := uniqueName(fmt.Sprintf("hook%d", i))
		create(t, d, shSpec(name, "sleep 3600", nil))
		if err := d.Start(ctx, name); err != nil {
			t.Fatalf("Start: %v", err)
		}
		if err := d.Stop(ctx, name, 5*time.Second); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := d.Delete(ctx, name); err != nil {
			t.Fatalf("Delete right after Stop: %v", err)
		}
	}
	name := create(t, d, shSpec(uniqueName("again"), "exit 4", nil))
	for range 3 {
		if err := d.Start(ctx, name); err != nil {
			t.Fatalf("Start: %v", err)
		}
		if st := waitState(t, d, name, drivers.StateStopped); st.ExitCode != 4 {
			t.Errorf("exit code %d, want 4", st.ExitCode)
		}
	}
}
