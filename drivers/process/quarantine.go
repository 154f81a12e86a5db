package process

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// damagedDir is DIR/damaged: where instance directories whose state file
// cannot be read are moved (REL-5).
const damagedDir = "damaged"

// quarantine handles an instance whose state file cannot be read: a torn
// or damaged write, or one that names another instance (REL-5). Without
// its record the driver cannot manage the run (its spec, labels, token
// and ports are lost), and a run nobody manages is an orphan beside the
// fresh instance the service starts for the slot. So its run is ended:
// every process whose environment names the instance, and everything in
// its cgroup; then its directory is moved to DIR/damaged/NAME-UNIXTIME for
// the operator, and the instance is gone from this driver (the service
// fills its slot afresh). It returns where the directory went.
func (d *Driver) quarantine(dir, name string, cause error) string {
	killed := killInstanceProcs(name)
	if d.cg != nil {
		if g, ok := d.cg.Leftover(filepath.Join(d.cg.Root(), name)); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			n, _ := g.Signal(unix.SIGKILL)
			killed += n
			if err := g.Drain(ctx, d.sleep); err == nil {
				_ = g.Remove(ctx, d.sleep)
			}
			cancel()
		}
	}
	dest := filepath.Join(d.opts.Dir, damagedDir, name+"-"+strconv.FormatInt(d.clk.Now().Unix(), 10))
	moved := dest
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil || os.Rename(dir, dest) != nil {
		moved = dir // left in place; load skips it again next time
	}
	d.log.Error().Err(cause).Str("instance", name).Int("killed", killed).Str("kept", moved).
		Msg("the instance's state file cannot be read: its run was ended (a run no record describes cannot be managed) and its directory kept for inspection; the service starts a fresh instance in its slot")
	return moved
}

// killInstanceProcs SIGKILLs every process whose environment says it
// belongs to instance name (ENGENHO_INSTANCE, set for every run) and
// returns how many it signalled.
func killInstanceProcs(name string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	mark := []byte("ENGENHO_INSTANCE=" + name)
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !hasEnv(env, mark) {
			continue
		}
		if unix.Kill(pid, unix.SIGKILL) == nil {
			n++
		}
	}
	return n
}

func hasEnv(env, kv []byte) bool {
	for _, v := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(v, kv) {
			return true
		}
	}
	return false
}
