package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/engenho/engenho/drivers/cgroup"
)

// CgroupRoot is a cgroup subtree of its own for one test process's
// process drivers (DRV-12): "engenho-test/NAME-PID-RANDOM", so tests that
// run side by side, or reuse instance names, never share a group. Remove
// it with CleanCgroups when the tests end.
func CgroupRoot(name string) string {
	var b [3]byte
	rand.Read(b[:])
	return "engenho-test/" + name + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// CleanCgroups kills what is left in the groups below root, removes them
// and root (and engenho-test when empty). It returns the groups it found,
// so a caller can tell a test that left one behind; nothing when this
// machine has no cgroups.
func CleanCgroups(root string) ([]string, error) {
	h, err := cgroup.Detect(cgroup.Options{Root: root})
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sleep := func(ctx context.Context, d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	// On cgroup v1 an rmdir can fail EBUSY for a moment after the last task
	// left (a killed daemon's start thread still exiting, or a group made
	// after the listing): list and remove again until the deadline.
	var found []string // the first listing: what the test left behind
	for tries := 0; ; tries++ {
		left, err := removeGroups(ctx, h, sleep)
		if tries == 0 {
			found = left
		}
		if err == nil {
			if err = h.RemoveRoot(); err == nil {
				return found, nil
			}
			err = fmt.Errorf("cgroup root %s: %w", root, err)
		}
		if sleep(ctx, 20*time.Millisecond) != nil {
			return found, err
		}
	}
}

func removeGroups(ctx context.Context, h *cgroup.Host, sleep func(context.Context, time.Duration) error) ([]string, error) {
	left := h.Groups()
	for _, rel := range left {
		g, ok := h.Leftover(rel) // also a group a failed removal left in some hierarchies only
		if !ok {
			continue
		}
		if err := g.Drain(ctx, sleep); err != nil {
			return left, err
		}
		if err := g.Remove(ctx, sleep); err != nil {
			return left, err
		}
	}
	return left, nil
}
