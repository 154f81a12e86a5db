package process

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"time"

	"github.com/engenho/engenho/drivers"
)

// Usage reads the instance's cgroup counters (DRV-16): CPU time and peak
// memory over the cgroup's life (every run since the last stop), memory
// and tasks now. Without a cgroup only the main process is measured, from
// /proc: its CPU time (with its reaped children's) and its resident set
// (peak: its high-water mark). A stopped instance uses nothing.
func (d *Driver) Usage(ctx context.Context, name string) (drivers.Usage, error) {
	in, err := d.lockLive(opUsage, name)
	if err != nil {
		return drivers.Usage{}, err
	}
	running, cg, pid := in.proc != nil, in.cg, in.rec.Pid
	in.mu.Unlock()
	if !running {
		return drivers.Usage{}, nil
	}
	if cg == nil {
		return procUsage(pid)
	}
	u, err := cg.Usage()
	if err != nil {
		return drivers.Usage{}, drivers.Wrap(DriverName, opUsage, name, drivers.ErrTransient, err)
	}
	return drivers.Usage{CPU: u.CPU, MemoryBytes: u.Memory, MemoryPeakBytes: u.MemoryPeak, Pids: u.Pids}, nil
}

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux ABI.
const userHZ = 100

// procUsage measures one process from /proc (no cgroup).
func procUsage(pid int) (drivers.Usage, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return drivers.Usage{}, nil // ended meanwhile
	}
	fields, err := statFields(stat)
	var ticks uint64
	if err == nil && len(fields) > 16-3 {
		for _, i := range []int{14, 15, 16, 17} { // utime stime cutime cstime
			v, _ := strconv.ParseUint(string(fields[i-3]), 10, 64)
			ticks += v
		}
	}
	u := drivers.Usage{CPU: time.Duration(ticks) * time.Second / userHZ, Pids: 1}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err == nil {
		u.MemoryBytes = statusKiB(status, "VmRSS:") << 10
		u.MemoryPeakBytes = statusKiB(status, "VmHWM:") << 10
	}
	return u, nil
}

// statusKiB reads a "Key:   1234 kB" line of /proc/PID/status.
func statusKiB(status []byte, key string) int64 {
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			f := bytes.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return n
			}
		}
	}
	return 0
}
