package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/chaos/inject"
	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// observation is one look at a node: its status, the drivers' unfiltered
// instances, its actor tree and, when asked, the marked processes on the
// machine.
type observation struct {
	at        time.Time
	status    control.StatusResult
	instances []inject.Instance
	tree      []supervise.Node
	procs     []invariant.Proc
	hasProcs  bool
}

// observe looks at n. Any failure (the daemon restarting, the runtime
// down) is an error: the caller polls again.
func (c *campaign) observe(ctx context.Context, n *node, withProcs bool) (observation, error) {
	var obs observation
	// The drivers first, then status: status is never older than the
	// instances it is compared with.
	res, err := n.chaos(ctx, control.ChaosArgs{Kind: "instances"})
	if err != nil {
		return obs, err
	}
	var all []inject.Instance
	if err := json.Unmarshal([]byte(res.Detail), &all); err != nil {
		return obs, fmt.Errorf("chaos instances: %w", err)
	}
	// An incusd is shared by the machine: keep the campaign's own stacks.
	for _, in := range all {
		if c.stacks.owns(in.Labels[drivers.LabelStack]) {
			obs.instances = append(obs.instances, in)
		}
	}
	if obs.status, err = n.status(ctx); err != nil {
		return obs, err
	}
	if err := n.call(ctx, func(ctx context.Context, cl *control.Client) error {
		t, err := cl.Tree(ctx)
		obs.tree = t.Nodes
		return err
	}); err != nil {
		return obs, err
	}
	if withProcs {
		obs.procs, obs.hasProcs = c.ownProcs(), true
	}
	obs.at = c.clk.Now() // recovery is counted to the end of the look
	return obs, nil
}

// healthy lists the instances status shows serving and healthy (or
// running without a probe) and in rotation.
func (o observation) healthy() map[string]bool {
	out := map[string]bool{}
	for _, svc := range o.status.Services {
		for _, r := range svc.Replicas {
			if r.Phase == "serving" && r.InRotation && (r.Health == "healthy" || r.Health == "none") {
				out[r.Instance] = true
			}
		}
	}
	return out
}

// treeNode finds an actor by path.
func (o observation) treeNode(path string) (supervise.Node, bool) {
	for _, n := range o.tree {
		if n.Path == path {
			return n, true
		}
	}
	return supervise.Node{}, false
}

// replica finds the status of an instance.
func (o observation) replica(instance string) (messages.ReplicaStatus, bool) {
	for _, svc := range o.status.Services {
		for _, r := range svc.Replicas {
			if r.Instance == instance {
				return r, true
			}
		}
	}
	return messages.ReplicaStatus{}, false
}

// ownProcs lists the marked processes of node a's stacks (the host pairs'
// processes are checked at the end, once their nodes are gone).
func (c *campaign) ownProcs() []invariant.Proc {
	var out []invariant.Proc
	for _, p := range markedProcs(c.run) {
		if stack, _, _ := strings.Cut(p.Service, "/"); c.stacks.owns(stack) {
			out = append(out, p)
		}
	}
	return out
}

// markedProcs lists the live processes whose environment carries
// CHAOS_RUN=run, with the stack and service their instance env names.
func markedProcs(run string) []invariant.Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	mark := []byte("CHAOS_RUN=" + run)
	var out []invariant.Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !hasVar(env, mark) {
			continue
		}
		pgid, state, ok := procStat(pid)
		if !ok || state == "Z" || state == "X" {
			continue
		}
		out = append(out, invariant.Proc{Pid: pid, Pgid: pgid,
			Service: envVar(env, "ENGENHO_STACK") + "/" + envVar(env, "ENGENHO_SERVICE")})
	}
	return out
}

func hasVar(env, kv []byte) bool {
	for _, v := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(v, kv) {
			return true
		}
	}
	return false
}

func envVar(env []byte, name string) string {
	prefix := []byte(name + "=")
	for _, v := range bytes.Split(env, []byte{0}) {
		if bytes.HasPrefix(v, prefix) {
			return string(v[len(prefix):])
		}
	}
	return ""
}

// procStat reads a process's group and state from /proc/PID/stat.
func procStat(pid int) (pgid int, state string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces and parens
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return 0, "", false
	}
	pgid, err = strconv.Atoi(f[2])
	return pgid, f[0], err == nil
}
