package cgroup

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The test VM's mountinfo: cgroup v1 hybrid, one controller per
// hierarchy, cgroup2 with no controllers at /sys/fs/cgroup/unified.
const hybridInfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

// A systemd host of the v1 era: cpu and cpuacct share a hierarchy.
const comountInfo = `25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
26 24 0:23 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,memory
27 24 0:24 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,pids
`

// A pure v2 host.
const unifiedInfo = `24 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`

// DRV-12: the layout is read from mountinfo: v1 hierarchies by their
// controllers (co-mounted or not, named ones ignored), the v2 mount, and
// the version picked for each kind of host.
func TestDRV12ParseMountinfo(t *testing.T) {
	v1, v2 := parseMountinfo([]byte(hybridInfo))
	if v2 != "/sys/fs/cgroup/unified" {
		t.Errorf("hybrid v2 mount %q", v2)
	}
	var got []string
	for _, h := range v1 {
		got = append(got, h.mount+"="+strings.Join(h.controllers, ",")+"/"+h.procsKey)
	}
	want := []string{"/sys/fs/cgroup/cpu=cpu/cpu", "/sys/fs/cgroup/cpuacct=cpuacct/cpuacct", "/sys/fs/cgroup/memory=memory/memory", "/sys/fs/cgroup/pids=pids/pids"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hybrid v1 hierarchies\n got %v\nwant %v", got, want)
	}
	if pickVersion(v1, v2) != V1 {
		t.Errorf("a hybrid host with v1 controllers should use v1")
	}
	v1, v2 = parseMountinfo([]byte(comountInfo))
	if len(v1) != 1+1+1 || v1[0].procsKey != "cpu,cpuacct" || !reflect.DeepEqual(v1[0].controllers, []string{"cpu", "cpuacct"}) || v2 != "" {
		t.Errorf("co-mounted: %+v %q", v1, v2)
	}
	v1, v2 = parseMountinfo([]byte(unifiedInfo))
	if len(v1) != 0 || v2 != "/sys/fs/cgroup" || pickVersion(v1, v2) != V2 {
		t.Errorf("unified: %+v %q", v1, v2)
	}
	if got := unescapeMount(`/mnt/with\040space`); got != "/mnt/with space" {
		t.Errorf("unescape: %q", got)
	}
}

// DRV-13: what each limit writes, on v1 and on v2. Unset limits are
// written as "none" so a reused group keeps no old value.
func TestDRV13LimitFiles(t *testing.T) {
	l := Limits{CPUs: 0.25, MemoryBytes: 64 << 20, MemoryLowBytes: 32 << 20, Pids: 50}
	v1 := settingsV1(l, true)
	wantV1 := []setting{
		{CPU, "cpu.cfs_period_us", "100000"},
		{CPU, "cpu.cfs_quota_us", "25000"},
		{Memory, "memory.limit_in_bytes", "67108864"},
		{Memory, "memory.memsw.limit_in_bytes", "67108864"},
		{Memory, "memory.soft_limit_in_bytes", "33554432"},
		{Pids, "pids.max", "50"},
	}
	if !reflect.DeepEqual(v1, wantV1) {
		t.Errorf("v1\n got %v\nwant %v", v1, wantV1)
	}
	none := settingsV1(Limits{}, false)
	wantNone := []setting{
		{CPU, "cpu.cfs_period_us", "100000"},
		{CPU, "cpu.cfs_quota_us", "-1"},
		{Memory, "memory.limit_in_bytes", "-1"},
		{Memory, "memory.soft_limit_in_bytes", "-1"},
		{Pids, "pids.max", "max"},
	}
	if !reflect.DeepEqual(none, wantNone) {
		t.Errorf("v1 none\n got %v\nwant %v", none, wantNone)
	}
	v2 := settingsV2(l)
	wantV2 := []setting{
		{CPU, "cpu.max", "25000 100000"},
		{Memory, "memory.max", "67108864"},
		{Memory, "memory.swap.max", "0"},
		{Memory, "memory.low", "33554432"},
		{Pids, "pids.max", "50"},
	}
	if !reflect.DeepEqual(v2, wantV2) {
		t.Errorf("v2\n got %v\nwant %v", v2, wantV2)
	}
	wantV2None := []setting{
		{CPU, "cpu.max", "max 100000"},
		{Memory, "memory.max", "max"},
		{Memory, "memory.swap.max", "max"},
		{Memory, "memory.low", "0"},
		{Pids, "pids.max", "max"},
	}
	if got := settingsV2(Limits{}); !reflect.DeepEqual(got, wantV2None) {
		t.Errorf("v2 none\n got %v\nwant %v", got, wantV2None)
	}
	// The kernel refuses a quota under 1ms.
	if q := quota(0.001); q != minQuota {
		t.Errorf("quota(0.001) = %d, want %d", q, minQuota)
	}
	if q := quota(1.5); q != 150000 {
		t.Errorf("quota(1.5) = %d", q)
	}
}

// DRV-17: a limit whose controller the host lacks is refused with the
// reason, as ErrUnavailable; limits it has pass.
func TestDRV17CheckNamesMissingControllers(t *testing.T) {
	h := &Host{version: V2, missing: map[string]error{
		Memory: unavailablef("cgroup memory: the memory controller is not available in /sys/fs/cgroup/unified"),
	}}
	if err := h.Check(Limits{CPUs: 1, Pids: 10}); err != nil {
		t.Errorf("cpu and pids are there: %v", err)
	}
	err := h.Check(Limits{MemoryBytes: 64 << 20})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "memory controller is not available") {
		t.Errorf("memory limit on a host without memory: %v", err)
	}
	if err := h.Check(Limits{}); err != nil {
		t.Errorf("no limits: %v", err)
	}
	full := &Host{version: V1, missing: map[string]error{}}
	if err := full.Check(Limits{MemoryBytes: 10 << 20, MemoryLowBytes: 20 << 20}); err == nil || !strings.Contains(err.Error(), "above the memory limit") {
		t.Errorf("reservation above limit: %v", err)
	}
	if h.Missing(CPUAcct) != nil {
		t.Errorf("v2 cpu time needs no controller")
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 100: "100 B", 1 << 10: "1 KiB", 64 << 20: "64 MiB", 256 << 20: "256 MiB",
		3 << 29: "1.5 GiB", 2 << 40: "2 TiB", 67_000_000: "63.9 MiB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// DRV-15: membership is read from /proc/PID/cgroup, per hierarchy.
func TestDRV15MemberOf(t *testing.T) {
	v1 := []byte("9:name=systemd:/\n8:pids:/engenho/web-1\n4:memory:/engenho/web-1\n2:cpu,cpuacct:/engenho/web-1\n0::/\n")
	if !memberOf(v1, "pids", V1, "/engenho/web-1") || !memberOf(v1, "cpu,cpuacct", V1, "/engenho/web-1") {
		t.Errorf("v1 member not seen")
	}
	if memberOf(v1, "pids", V1, "/engenho/web-2") || memberOf(v1, "blkio", V1, "/engenho/web-1") {
		t.Errorf("v1 false member")
	}
	v2 := []byte("0::/engenho/web-1\n")
	if !memberOf(v2, "", V2, "/engenho/web-1") || memberOf(v2, "", V2, "/engenho") {
		t.Errorf("v2 membership")
	}
}

// DRV-14, DRV-16: the counters' formats.
func TestDRV14CounterFormats(t *testing.T) {
	oom := []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
	if n, err := field(oom, "oom_kill"); err != nil || n != 3 {
		t.Errorf("v1 oom_control: %d %v", n, err)
	}
	events := []byte("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n")
	if n, err := field(events, "oom_kill"); err != nil || n != 2 {
		t.Errorf("v2 memory.events: %d %v", n, err)
	}
	stat := []byte("usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n")
	if n, err := field(stat, "usage_usec"); err != nil || n != 1234567 {
		t.Errorf("v2 cpu.stat: %d %v", n, err)
	}
	if _, err := field(stat, "nr_throttled"); err == nil {
		t.Errorf("a missing key must fail")
	}
	if got := parsePids([]byte("12\n345\n\n")); !reflect.DeepEqual(got, []int{12, 345}) {
		t.Errorf("parsePids: %v", got)
	}
}

// SEC-3: group paths are clean and relative.
func TestCheckRel(t *testing.T) {
	for _, bad := range []string{"", "/engenho", "../x", "a/../b", ".", "a//b", "a/"} {
		if checkRel(bad) == nil {
			t.Errorf("checkRel(%q) accepted", bad)
		}
	}
	for _, ok := range []string{"engenho", "engenho/test-1", "system.slice/engenho.service"} {
		if err := checkRel(ok); err != nil {
			t.Errorf("checkRel(%q): %v", ok, err)
		}
	}
}
