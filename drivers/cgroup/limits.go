package cgroup

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits are what a group enforces; zero means none.
type Limits struct {
	// CPUs is a CFS quota in CPUs per period: 0.25 is a quarter of one
	// CPU's time.
	CPUs float64
	// MemoryBytes is the hard limit: past it the kernel reclaims, then
	// OOM-kills a process of the group. Swap is covered too where the
	// host accounts it (v1 memsw, v2 memory.swap.max 0).
	MemoryBytes int64
	// MemoryLowBytes is the reservation: v1 soft limit (the group is
	// reclaimed towards it first under pressure), v2 memory.low (memory
	// below it is protected from reclaim).
	MemoryLowBytes int64
	// Pids caps the tasks (processes and threads) in the group.
	Pids int64
}

// CFSPeriod is the CFS period, in microseconds, a cpus limit is spread
// over: 100ms, the kernel's default.
const CFSPeriod = 100_000

// minQuota is the kernel's lower bound on cpu.cfs_quota_us (1ms).
const minQuota = 1000

// quota is cpus as a CFS quota in microseconds per CFSPeriod.
func quota(cpus float64) int64 {
	return max(int64(math.Round(cpus*CFSPeriod)), minQuota)
}

// Needs lists the controllers l needs.
func (l Limits) Needs() []string {
	var out []string
	if l.CPUs > 0 {
		out = append(out, CPU)
	}
	if l.MemoryBytes > 0 || l.MemoryLowBytes > 0 {
		out = append(out, Memory)
	}
	if l.Pids > 0 {
		out = append(out, Pids)
	}
	return out
}

// Describe says the limits in words: "cpus 0.25, memory 64 MiB".
func (l Limits) Describe() string {
	var parts []string
	if l.CPUs > 0 {
		parts = append(parts, "cpus "+strconv.FormatFloat(l.CPUs, 'g', -1, 64))
	}
	if l.MemoryBytes > 0 {
		parts = append(parts, "memory "+FormatBytes(l.MemoryBytes))
	}
	if l.MemoryLowBytes > 0 {
		parts = append(parts, "memory reservation "+FormatBytes(l.MemoryLowBytes))
	}
	if l.Pids > 0 {
		parts = append(parts, "pids "+strconv.FormatInt(l.Pids, 10))
	}
	return strings.Join(parts, ", ")
}

// Check says why h cannot enforce l: every limit whose controller is
// missing, with the reason (ErrUnavailable). nil when it can.
func (h *Host) Check(l Limits) error {
	var errs []error
	for _, c := range l.Needs() {
		if err := h.Missing(c); err != nil {
			errs = append(errs, err)
		}
	}
	if l.MemoryBytes > 0 && l.MemoryLowBytes > l.MemoryBytes {
		errs = append(errs, fmt.Errorf("memory reservation %s is above the memory limit %s", FormatBytes(l.MemoryLowBytes), FormatBytes(l.MemoryBytes)))
	}
	return errors.Join(errs...)
}

// setting is one control file and the value written to it.
type setting struct {
	controller, file, value string
}

// settingsV1 are the files a v1 group gets for l, in the order written.
// Unset limits are written too (-1, "max"), so a group reused after a
// crash never keeps an old value. memsw is set only where it exists.
func settingsV1(l Limits, memsw bool) []setting {
	num := func(v int64) string {
		if v <= 0 {
			return "-1"
		}
		return strconv.FormatInt(v, 10)
	}
	q := "-1"
	if l.CPUs > 0 {
		q = strconv.FormatInt(quota(l.CPUs), 10)
	}
	out := []setting{
		{CPU, "cpu.cfs_period_us", strconv.Itoa(CFSPeriod)},
		{CPU, "cpu.cfs_quota_us", q},
		{Memory, "memory.limit_in_bytes", num(l.MemoryBytes)},
	}
	if memsw {
		out = append(out, setting{Memory, "memory.memsw.limit_in_bytes", num(l.MemoryBytes)})
	}
	out = append(out, setting{Memory, "memory.soft_limit_in_bytes", num(l.MemoryLowBytes)})
	pids := "max"
	if l.Pids > 0 {
		pids = strconv.FormatInt(l.Pids, 10)
	}
	return append(out, setting{Pids, "pids.max", pids})
}

// settingsV2 are the files a v2 group gets for l.
func settingsV2(l Limits) []setting {
	cpu := "max " + strconv.Itoa(CFSPeriod)
	if l.CPUs > 0 {
		cpu = strconv.FormatInt(quota(l.CPUs), 10) + " " + strconv.Itoa(CFSPeriod)
	}
	mem, swap := "max", "max"
	if l.MemoryBytes > 0 {
		mem, swap = strconv.FormatInt(l.MemoryBytes, 10), "0"
	}
	low := "0"
	if l.MemoryLowBytes > 0 {
		low = strconv.FormatInt(l.MemoryLowBytes, 10)
	}
	pids := "max"
	if l.Pids > 0 {
		pids = strconv.FormatInt(l.Pids, 10)
	}
	return []setting{
		{CPU, "cpu.max", cpu},
		{Memory, "memory.max", mem},
		{Memory, "memory.swap.max", swap},
		{Memory, "memory.low", low},
		{Pids, "pids.max", pids},
	}
}

// FormatBytes is a size for people: "64 MiB", "1.5 GiB", "512 KiB",
// "100 B"; binary units as the stack file's sizes are.
func FormatBytes(n int64) string {
	const (
		ki = 1 << 10
		mi = 1 << 20
		gi = 1 << 30
		ti = 1 << 40
	)
	unit := func(d int64, name string) string {
		v := float64(n) / float64(d)
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + name
	}
	switch {
	case n >= ti:
		return unit(ti, "TiB")
	case n >= gi:
		return unit(gi, "GiB")
	case n >= mi:
		return unit(mi, "MiB")
	case n >= ki:
		return unit(ki, "KiB")
	}
	return strconv.FormatInt(n, 10) + " B"
}
