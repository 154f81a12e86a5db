package process

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// procStartTime returns field 22 of /proc/PID/stat: when the process
// started, in clock ticks since boot. With the pid it identifies a process
// for good: a reused pid has a later start time (DRV-4).
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStartTime(b)
}

// parseStartTime reads starttime (field 22) from the text of /proc/PID/stat.
func parseStartTime(stat []byte) (uint64, error) {
	fields, err := statFields(stat)
	if err != nil {
		return 0, err
	}
	return startField(fields)
}

// groupLeaderStart returns pid's start time when pid leads its process
// group (field 5 of /proc/PID/stat is pid), from one read of that file.
func groupLeaderStart(pid int) (uint64, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	fields, err := statFields(stat)
	const pgrp = 5 - 3
	if err != nil || len(fields) <= pgrp || string(fields[pgrp]) != strconv.Itoa(pid) {
		return 0, false
	}
	start, err := startField(fields)
	return start, err == nil
}

// processGroup returns pid's process group (field 5 of /proc/PID/stat),
// 0 when unknown.
func processGroup(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	fields, err := statFields(stat)
	const pgrp = 5 - 3
	if err != nil || len(fields) <= pgrp {
		return 0
	}
	n, _ := strconv.Atoi(string(fields[pgrp]))
	return n
}

// startField reads starttime from fields as statFields splits them.
func startField(fields [][]byte) (uint64, error) {
	const idx = 22 - 3
	if len(fields) <= idx {
		return 0, fmt.Errorf("/proc stat: %d fields after the command, want more than %d", len(fields), idx)
	}
	v, err := strconv.ParseUint(string(fields[idx]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat: starttime: %w", err)
	}
	return v, nil
}

// statFields splits the text of /proc/PID/stat after the command (field
// 2), which is in parentheses and may hold spaces or ')': so the fields are
// counted from the last ')', and fields[0] is field 3 (state).
func statFields(stat []byte) ([][]byte, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return nil, fmt.Errorf("/proc stat: no command field")
	}
	return bytes.Fields(stat[end+1:]), nil
}
