package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/drivertest"
)

// fdsOf lists pid's open descriptors, each with what it refers to.
func fdsOf(t *testing.T, pid int) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("descriptors of %d: %v", pid, err)
	}
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		out = append(out, e.Name()+" -> "+target)
	}
	return out
}

// fdNumbers keeps the numbers of fdsOf's entries, in numeric order.
func fdNumbers(fds []string) []int {
	var out []int
	for _, f := range fds {
		n, _ := strconv.Atoi(strings.Fields(f)[0])
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// DRV-3, DMN-1: a workload and its exec probe inherit only descriptors
// 0, 1 and 2, although the daemon itself was started with more open (as
// a login shell leaves fds 10 and 255, or a service manager its own):
// the daemon marks what it inherited close-on-exec at startup. The
// daemon is started as systemd's socket activation would start it
// (LISTEN_PID, LISTEN_FDS): that is not supported, so the daemon says so,
// and neither the descriptors nor the variables reach a workload.
func TestDRV3WorkloadsInheritOnlyStdio(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	leak, err := os.Create(filepath.Join(n.dir, "inherited-by-the-daemon"))
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	for range 8 { // descriptors 3..10 in the daemon
		n.inherit = append(n.inherit, leak)
	}
	n.launcher = []string{"/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=2 LISTEN_FDNAMES=a:b exec "$@"`, "sh"}
	n.start("running")
	if !strings.Contains(n.log.String(), "socket activation is not supported") {
		t.Errorf("the daemon did not say that socket activation is unsupported")
	}
	if got := fdsOf(t, n.cmd.Process.Pid); !slices.ContainsFunc(got, func(f string) bool {
		return strings.HasPrefix(f, "10 -> ") && strings.HasSuffix(f, "inherited-by-the-daemon")
	}) {
		t.Fatalf("the daemon did not inherit descriptor 10 (test setup): %v", got)
	}
	// The probe's shell lists its own descriptors (ls is its child): the
	// listing is the probe's output, kept as the replica's last probe.
	stack := n.writeFile("fds.yaml", `name: fds
services:
  idle:
    command: ["/bin/sh", "-c", "exec sleep 100000"]
    healthcheck:
      test: ["CMD", "/bin/sh", "-c", "ls /proc/$$$$/fd"]
      interval: 1s
      start_interval: 200ms
    stop_grace_period: 1s
`)
	n.mustCLI("apply", stack, "--wait")
	s := n.service("fds", "idle")
	if len(s.Replicas) != 1 {
		t.Fatalf("replicas: %+v", s.Replicas)
	}
	want := []int{0, 1, 2}
	pid := pidOf(t, n, s.Replicas[0].Instance)
	if got := fdsOf(t, pid); !slices.Equal(fdNumbers(got), want) {
		t.Errorf("the workload's descriptors: %v, want only 0, 1, 2", got)
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err != nil || strings.Contains(string(env), "LISTEN_") {
		t.Errorf("the workload's environment: %q %v, want no LISTEN_ variable", env, err)
	}
	var probe []int
	for _, f := range strings.Fields(s.Replicas[0].LastProbe) {
		fd, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("the probe's output %q is not a descriptor list", s.Replicas[0].LastProbe)
		}
		probe = append(probe, fd)
	}
	slices.Sort(probe)
	if !slices.Equal(probe, want) {
		t.Errorf("the exec probe's descriptors: %v, want only 0, 1, 2", probe)
	}
}

// DRV-3, DRV-4, DMN-9: the real daemon is SIGKILLed and adopts replicas
// whose shell left a child in its process group (`sleep 1000 & wait`,
// the orphan of issue 13). Stopping one (service stop), retiring one
// (scale down) and removing the last (remove) each end the whole group:
// no `sleep` is left behind.
func TestDRV4AdoptedReplicasEndWithTheirWholeGroup(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	n.start("running")
	stack := n.writeFile("groups.yaml", `name: groups
services:
  a:
    command: ["/bin/sh", "-c", "sleep 1000 & wait"]
    deploy: {replicas: 2}
    stop_grace_period: 2s
  b:
    command: ["/bin/sh", "-c", "sleep 1000 & wait"]
    stop_grace_period: 2s
`)
	n.mustCLI("apply", stack, "--wait")
	pids := map[string]int{} // instance -> pid, which is its process group
	slots := map[string]int{}
	for _, svc := range []string{"a", "b"} {
		for _, r := range n.service("groups", svc).Replicas {
			pids[r.Instance] = pidOf(t, n, r.Instance)
			slots[svc+"/"+strconv.Itoa(r.Slot)] = pids[r.Instance]
		}
	}
	if len(pids) != 3 {
		t.Fatalf("replicas: %v", pids)
	}
	for inst, pgid := range pids {
		n.eventually(inst+"'s sleep in its group", 10*time.Second, func() bool { return len(drivertest.GroupMembers(pgid)) == 2 })
	}

	n.kill()
	n.start("running")
	n.eventually("the replicas adopted", 60*time.Second, func() bool {
		a, b := n.service("groups", "a"), n.service("groups", "b")
		return converged(a) && converged(b) && len(a.Replicas) == 2 && len(b.Replicas) == 1
	})
	for _, svc := range []string{"a", "b"} {
		for _, r := range n.service("groups", svc).Replicas {
			if pids[r.Instance] == 0 || pidOf(t, n, r.Instance) != pids[r.Instance] || r.Restarts != 0 {
				t.Fatalf("%s was not adopted as it ran (pid %d, %d restarts)", r.Instance, pids[r.Instance], r.Restarts)
			}
		}
	}
	gone := func(what string, pgid int) {
		t.Helper()
		n.eventually(what+": group "+strconv.Itoa(pgid)+" gone", 20*time.Second, func() bool { return len(drivertest.GroupMembers(pgid)) == 0 })
	}

	n.mustCLI("service", "stop", "groups/b")
	gone("service stop of b", slots["b/1"])
	n.mustCLI("scale", "groups/a", "1")
	gone("scale of a to 1", slots["a/2"])
	if len(drivertest.GroupMembers(slots["a/1"])) != 2 {
		t.Fatalf("slot 1 of a was touched by the scale down: %v", drivertest.GroupMembers(slots["a/1"]))
	}
	n.mustCLI("remove", "groups")
	gone("remove", slots["a/1"])
}
