// Package cgroup puts the process driver's instances in control groups of
// their own, under a subtree engenho owns, enforces their limits, reads
// their usage and kills everything in them (spec DRV-12..DRV-17).
//
// It speaks both cgroup versions. On a v1 or hybrid host (controllers
// mounted one hierarchy each, as on the test VM) an instance has one
// directory per hierarchy of cpu, cpuacct, memory and pids; on a v2 host
// one directory in the unified hierarchy. A child is placed before it runs
// its first instruction: on v2 with clone3(CLONE_INTO_CGROUP), on v1 by
// forking it from an OS thread that joined the instance's groups first
// (see Group.Start). The file formats are a handful of integers; why this
// is written here rather than imported is in docs/decisions.md.
//
// Layer: drivers. It imports the standard library and golang.org/x/sys
// only; drivers/process uses it.
package cgroup
