package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Usage is what a group's processes use, as the kernel counts it for the
// group (every run since the group was made).
type Usage struct {
	// CPU is the CPU time used (user and system).
	CPU time.Duration
	// Memory is the memory charged to the group now: what its limit is
	// counted against, page cache included.
	Memory int64
	// MemoryPeak is the highest Memory since the group was made (0 where
	// the kernel does not keep it: v2 before Linux 5.19).
	MemoryPeak int64
	// Pids is the number of tasks in the group.
	Pids int64
}

// Usage reads the group's counters: 4 small files. A counter whose
// controller the host lacks reads 0.
func (g *Group) Usage() (Usage, error) {
	var u Usage
	var errs []error
	read := func(c, file string, into *int64) {
		if g.h.Missing(c) != nil {
			return
		}
		v, err := g.readInt(filepath.Join(g.Dir(c), file))
		if err != nil {
			errs = append(errs, err)
			return
		}
		*into = v
	}
	var cpu int64
	if g.h.version == V2 {
		var buf [1024]byte // cpu.stat: a dozen lines
		n, err := g.readCounter(filepath.Join(g.Dir(CPU), "cpu.stat"), buf[:])
		if err == nil {
			cpu, err = field(buf[:n], "usage_usec")
		}
		if err != nil {
			errs = append(errs, err)
		}
		u.CPU = time.Duration(cpu) * time.Microsecond
		read(Memory, "memory.current", &u.Memory)
		if g.h.Missing(Memory) == nil {
			u.MemoryPeak, _ = g.readInt(filepath.Join(g.Dir(Memory), "memory.peak"))
		}
	} else {
		read(CPUAcct, "cpuacct.usage", &cpu)
		u.CPU = time.Duration(cpu)
		read(Memory, "memory.usage_in_bytes", &u.Memory)
		read(Memory, "memory.max_usage_in_bytes", &u.MemoryPeak)
	}
	read(Pids, "pids.current", &u.Pids)
	return u, errors.Join(errs...)
}

// OOMKills is how many processes the kernel's OOM killer has killed in
// the group since it was made (v1 memory.oom_control, v2 memory.events).
func (g *Group) OOMKills() (uint64, error) {
	if err := g.h.Missing(Memory); err != nil {
		return 0, err
	}
	file := "memory.oom_control"
	if g.h.version == V2 {
		file = "memory.events"
	}
	b, err := readSmall(filepath.Join(g.Dir(Memory), file))
	if err != nil {
		return 0, err
	}
	n, err := field(b, "oom_kill")
	return uint64(n), err
}

// field reads "KEY VALUE" lines (cpu.stat, memory.events, oom_control).
func field(b []byte, key string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(" "))
		if ok && string(k) == key {
			return strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %q", key, b)
}

// readSmall reads a control file of at most 4 KiB with three syscalls.
func readSmall(path string) ([]byte, error) {
	buf := make([]byte, 4096)
	n, err := readInto(path, buf)
	return buf[:n], err
}

// readInto reads path into buf: open, one read, close.
func readInto(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return n, nil
}

// readInt reads one of the group's counters holding one integer.
func (g *Group) readInt(path string) (int64, error) {
	var buf [64]byte
	n, err := g.readCounter(path, buf[:])
	if err != nil {
		return 0, err
	}
	return parseInt(path, buf[:n])
}

func parseInt(path string, buf []byte) (int64, error) {
	s := string(bytes.TrimSpace(buf))
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
