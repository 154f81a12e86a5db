// Package process is the embedded default instance driver: each instance is
// a local process (spec DRV-3, DRV-4).
//
// A run is the spec's command in a process group of its own, with the
// spec's env (plus PATH, HOME, PORT, PORT_<target> and ENGENHO_RUN_TOKEN;
// nothing else of the daemon's environment), working directory and user. stdout and stderr go
// to DIR/instances/NAME/output.log, rotated by size; those and /dev/null as
// stdin are its only descriptors. Stop sends SIGTERM to the group, then
// SIGKILL after the grace. When a run's main process exits the rest of its
// group is killed. The group is named through the main process's pidfd,
// so this holds for adopted runs too, after their main process died.
//
// Exits are seen at once, never polled: every process is watched through a
// pidfd in one epoll set served by one goroutine shared by all Drivers in
// the process. Our own children are then reaped with wait4(pid); adopted
// processes (left running by an earlier daemon, identified by pid and
// /proc start time in their state file) are not our children, so only
// their exit is seen, not their exit code (-1).
//
// The spawning rule. In the daemon, every child goes through a process
// Driver's spawner (Start and Exec), after MarkInheritedCloseOnExec kept
// what the daemon inherited from reaching them. The daemon calls BecomeSubreaper so
// orphaned grandchildren are reparented to it; the reaper then answers
// SIGCHLD with wait4(-1), which would also reap a child started any other
// way (os/exec and the like) and make its Wait fail. Tests that do not call
// BecomeSubreaper may use os/exec freely.
package process
