package daemon_test

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// SVC-24: through the daemon and the process driver, the instances of a
// service get their host ports from ports.instance_range, and a
// start-first rollout's new instances get ports that no instance of the
// old revision had: a just-released port is not reused at once.
func TestSVC24StartFirstRolloutPortsFromTheRange(t *testing.T) {
	n := newNode(t)
	n.start("running")
	defer n.stop()
	file := n.writeFile("served.yaml", servedStack(18094, "ok"))
	n.mustCLI("apply", file, "--wait")
	hostPorts := func() map[int]bool {
		out := map[int]bool{}
		for _, r := range n.service("served", "web").Replicas {
			_, p, err := net.SplitHostPort(r.Addresses[80])
			if err != nil {
				t.Fatalf("replica %s: address %q", r.Instance, r.Addresses[80])
			}
			port, _ := strconv.Atoi(p)
			if !n.portRange.Contains(port) {
				t.Fatalf("replica %s on port %d, outside the range %s", r.Instance, port, n.portRange)
			}
			out[port] = true
		}
		return out
	}
	before := hostPorts()
	if len(before) != 3 {
		t.Fatalf("v1 host ports %v, want 3 distinct", before)
	}
	rev := n.service("served", "web").Revision
	n.mustCLI("apply", n.writeFile("served.yaml", servedStack(18094, "fine")), "--wait")
	n.eventually("rolled out", 60*time.Second, func() bool {
		st := n.service("served", "web")
		return st.Revision != rev && len(st.Replicas) == 3
	})
	after := hostPorts()
	if len(after) != 3 {
		t.Fatalf("v2 host ports %v, want 3 distinct", after)
	}
	for p := range after {
		if before[p] {
			t.Fatalf("v2 reuses v1's port %d at once (v1 %v, v2 %v)", p, before, after)
		}
	}
}
