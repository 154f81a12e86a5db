package daemon_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/incus"
)

func needIncus(t *testing.T) {
	_, err := os.Stat(incus.DefaultSocket)
	reason := "no incusd socket at " + incus.DefaultSocket + " (bash drivers/incus/setup.sh starts one)"
	if err == nil {
		d, derr := incus.New(incus.Options{})
		if derr == nil {
			_ = d.Close()
		} else {
			err, reason = derr, derr.Error()
		}
	}
	drivertest.Need(t, "incus", err == nil, reason)
	drivertest.LockIncus(t)
}

// The incus demo stack, on a port of its own.
func incusStack(t *testing.T, version string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "configs", "stacks", "incus-demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "127.0.0.1:8081:80", "127.0.0.1:18081:80", 1)
	return strings.Replace(s, `hello from $(hostname)`, `hello `+version+` from $(hostname)`, 1)
}

func get(url string) (string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// DRV-5, DRV-6, SVC-6, SVC-12, DMN-9 on a real incusd: a service with 2
// replicas converges and is reached through the balancer; a container whose
// init is killed from the host recovers; a new revision rolls out; a daemon
// SIGKILL is followed by adoption without a restart.
func TestIncusServiceEndToEnd(t *testing.T) {
	needIncus(t)
	n := newNode(t)
	n.extra = "drivers: {incus: {enabled: true}}\n"
	n.writeConfig()
	n.start("running")
	defer func() {
		if n.cmd != nil {
			n.cli("remove", "incus-demo")
			n.eventually("removed", 2*time.Minute, func() bool { return len(n.service("incus-demo", "web").Replicas) == 0 })
		}
	}()
	n.mustCLI("apply", n.writeFile("incus.yaml", incusStack(t, "v1")), "--wait")
	body, err := get("http://127.0.0.1:18081/")
	if err != nil || !strings.Contains(body, "hello v1 from") {
		t.Fatalf("through the balancer: %q %v", body, err)
	}

	svc := n.service("incus-demo", "web")
	victim := svc.Replicas[0]
	pid := containerInit(t, n, victim.Instance)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing init %d: %v", pid, err)
	}
	n.eventually("the killed container recovered", 3*time.Minute, func() bool {
		s := n.service("incus-demo", "web")
		for _, r := range s.Replicas {
			if r.Slot == victim.Slot && (r.Restarts > 0 || r.Instance != victim.Instance) && r.InRotation {
				return converged(s)
			}
		}
		return false
	})

	n.mustCLI("apply", n.writeFile("incus.yaml", incusStack(t, "v2")), "--wait")
	if body, _ := get("http://127.0.0.1:18081/"); !strings.Contains(body, "hello v2 from") {
		t.Fatalf("after the rollout: %q", body)
	}

	before := instances(n.service("incus-demo", "web"))
	n.kill()
	n.start("running")
	n.eventually("adopted", 2*time.Minute, func() bool { return converged(n.service("incus-demo", "web")) })
	after := n.service("incus-demo", "web")
	for inst, at := range before {
		if !instances(after)[inst].Equal(at) {
			t.Errorf("%s restarted by the daemon's restart", inst)
		}
	}
	for _, r := range after.Replicas {
		if r.Restarts != 0 {
			t.Errorf("%s: %d restarts after adoption", r.Instance, r.Restarts)
		}
	}
}

// containerInit is the host pid of a container's init.
func containerInit(t *testing.T, n *node, instance string) int {
	t.Helper()
	d, err := incus.New(incus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st, err := d.Inspect(t.Context(), instance)
	if err != nil || st.Pid <= 0 {
		t.Fatalf("inspect %s: %+v %v", instance, st, err)
	}
	return st.Pid
}
