package drivertest

import (
	"os"
	"strconv"
	"strings"
)

// GroupMembers returns the live (not zombie) processes of process group
// pgid, read from /proc: tests of process-group cleanup use it to see
// what a workload left behind.
func GroupMembers(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After the command: state, ppid, pgrp.
		if f := strings.Fields(s[i+1:]); len(f) > 2 && f[0] != "Z" && f[2] == want {
			out = append(out, pid)
		}
	}
	return out
}
