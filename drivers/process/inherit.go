package process

import (
	"fmt"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeRangeCloexec is CLOSE_RANGE_CLOEXEC (linux/close_range.h, Linux
// 5.11): close_range marks the range close-on-exec instead of closing it.
const closeRangeCloexec = 1 << 2

// MarkInheritedCloseOnExec marks every open descriptor above stderr that
// is not close-on-exec yet as close-on-exec, and returns their numbers.
// Go opens its own descriptors close-on-exec, so the ones it finds were
// inherited from whatever started the process (a login shell leaves fds
// 10 and 255 open, a service manager its own). Without this they would
// flow on through every fork/exec into every workload and probe, since a
// child is given its listed Files and every descriptor not marked. The
// daemon calls it once at start, before it opens anything. The
// descriptors stay open for the process itself.
func MarkInheritedCloseOnExec() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		// No /proc: mark the whole range, without knowing what it held.
		if err := unix.CloseRange(3, math.MaxUint32, closeRangeCloexec); err != nil {
			return nil, fmt.Errorf("close_range(3, ~0, CLOSE_RANGE_CLOEXEC): %w", err)
		}
		return nil, nil
	}
	var marked []int
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // closed since the listing (the listing's own), or already marked
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
			return marked, fmt.Errorf("marking descriptor %d close-on-exec: %w", fd, err)
		}
		marked = append(marked, fd)
	}
	return marked, nil
}
