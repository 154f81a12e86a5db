package daemon_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/cgroup"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/messages"
)

// The resource tests run the real daemon with process replicas in real
// cgroups (root; cgroup v1 hybrid on the test VM).

const resourcesStack = `name: res
services:
  hog:
    command: [tail, /dev/zero]
    deploy:
      resources:
        limits: {memory: 64M}
  held:
    command: [sh, -c, "x=$(head -c 20000000 /dev/zero | tr '\\0' a); echo held; sleep 100000"]
    mem_limit: 256m
    stop_grace_period: 1s
`

func needDaemonCgroups(t *testing.T) {
	t.Helper()
	drivertest.Need(t, "cgroups", os.Geteuid() == 0, "the daemon makes cgroups only as root")
	_, err := cgroup.Detect(cgroup.Options{Root: "engenho-test"})
	drivertest.Need(t, "cgroups", err == nil, "no usable cgroup hierarchy")
}

// instanceCgroup opens the cgroup a replica's state file names.
func instanceCgroup(t *testing.T, n *node, instance string) *cgroup.Group {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.data(), "instances", instance, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Cgroup string `json:"cgroup"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Cgroup == "" {
		t.Fatalf("%s names no cgroup (%v)", instance, err)
	}
	h, err := cgroup.Detect(cgroup.Options{Root: n.cgroupRoot})
	if err != nil {
		t.Fatal(err)
	}
	g, ok := h.Open(st.Cgroup, cgroup.Limits{})
	if !ok {
		t.Fatalf("cgroup %s of %s does not exist", st.Cgroup, instance)
	}
	return g
}

func groupGone(g *cgroup.Group) bool {
	for _, c := range []string{cgroup.CPU, cgroup.CPUAcct, cgroup.Memory, cgroup.Pids} {
		if dir := g.Dir(c); dir != "" {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				return false
			}
		}
	}
	return true
}

// DRV-13, DRV-14, DRV-16: through the real daemon, a memory hog limited to
// 64M is OOM-killed and status, events and `engenho why` say
// "oom-killed (limit 64 MiB)", charged on the ladder; a steady replica's
// usage in status is within 10% of its cgroup's own counters.
func TestDRV14OOMReasonAndUsageThroughTheDaemon(t *testing.T) {
	needDaemonCgroups(t)
	n := newNode(t)
	n.extra = "usage: {interval: 1s}\n"
	n.writeConfig()
	n.start("running")
	n.mustCLI("apply", n.writeFile("res.yaml", resourcesStack))

	const reason = "oom-killed (limit 64 MiB)"
	n.eventually("the hog's OOM kill in status", time.Minute, func() bool {
		s := n.service("res", "hog")
		return len(s.Replicas) == 1 && strings.Contains(s.Replicas[0].LastError, reason) && s.Replicas[0].Ledger.Failures >= 1
	})
	if out := n.mustCLI("why", "res/hog"); !strings.Contains(out, reason) {
		t.Errorf("engenho why does not give the reason:\n%s", out)
	}
	events := n.mustCLI("events", "--json")
	found := false
	for _, line := range strings.Split(events, "\n") {
		var ev messages.Event
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == messages.KindReplicaFailed && strings.HasPrefix(ev.Message, reason+"; failure ") {
			found = true
		}
	}
	if !found {
		t.Errorf("no replica.failed event says %q:\n%s", reason, events)
	}

	var held messages.ReplicaStatus
	n.eventually("the steady replica's usage in status", time.Minute, func() bool {
		s := n.service("res", "held")
		if len(s.Replicas) != 1 || s.Replicas[0].Usage == nil || s.Replicas[0].Usage.CPUCores == nil {
			return false
		}
		held = s.Replicas[0]
		return held.Usage.MemoryBytes > 20e6
	})
	g := instanceCgroup(t, n, held.Instance)
	own, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	u := held.Usage
	if !near(float64(u.MemoryBytes), float64(own.Memory)) || !near(u.CPUSeconds, own.CPU.Seconds()) || u.Pids != own.Pids {
		t.Errorf("status usage %+v, the cgroup's own counters %+v: not within 10%%", *u, own)
	}
	top := n.mustCLI("top", "--no-stream", "res")
	if !strings.Contains(top, "res/held/1") || !strings.Contains(top, held.Instance) {
		t.Errorf("engenho top --no-stream:\n%s", top)
	}
	n.mustCLI("remove", "res")
	n.eventually("removed", time.Minute, func() bool { st, _ := n.status(); return len(st.Services) == 0 })
	if !groupGone(g) {
		t.Errorf("remove left cgroup %s", g.Rel())
	}
}

func near(got, want float64) bool { return math.Abs(got-want) <= 0.10*math.Abs(want) }

// DRV-15: after a daemon SIGKILL the next daemon adopts the replica with
// its cgroup (no restart); `engenho service stop` then leaves no process
// in the cgroup, also one that left the process group, and removes it.
func TestDRV15AdoptedReplicaStopEmptiesItsCgroup(t *testing.T) {
	needDaemonCgroups(t)
	n := newNode(t)
	n.start("running")
	n.mustCLI("apply", n.writeFile("esc.yaml", `name: esc
services:
  app:
    command: [sh, -c, "setsid sleep 100001 & sleep 100000"]
    stop_grace_period: 1s
`))
	var rep messages.ReplicaStatus
	n.eventually("serving", time.Minute, func() bool {
		s := n.service("esc", "app")
		if len(s.Replicas) != 1 || s.Replicas[0].Phase != "serving" {
			return false
		}
		rep = s.Replicas[0]
		return true
	})
	g := instanceCgroup(t, n, rep.Instance)
	n.eventually("both sleeps in the cgroup", 30*time.Second, func() bool { p, _ := g.Procs(); return len(p) >= 3 })
	procs, _ := g.Procs()
	n.kill()
	n.start("running")
	n.eventually("adopted", time.Minute, func() bool {
		s := n.service("esc", "app")
		return len(s.Replicas) == 1 && s.Replicas[0].Phase == "serving"
	})
	if s := n.service("esc", "app"); !s.Replicas[0].StartedAt.Equal(rep.StartedAt) {
		t.Fatalf("the replica was restarted, not adopted: %v, was %v", s.Replicas[0].StartedAt, rep.StartedAt)
	}
	n.mustCLI("service", "stop", "esc/app")
	n.eventually("stopped", time.Minute, func() bool {
		s := n.service("esc", "app")
		return len(s.Replicas) == 1 && s.Replicas[0].Phase == "stopped"
	})
	n.eventually("the cgroup gone", 30*time.Second, func() bool { return groupGone(g) })
	for _, pid := range procs {
		if liveProcess(pid) {
			t.Errorf("process %d of the stopped replica is alive", pid)
		}
	}
}

// liveProcess: pid exists and is not a zombie (the killed processes of an
// adopted replica are reaped by init, in its own time).
func liveProcess(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}
