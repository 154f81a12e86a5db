package stackfile

import (
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Resource keys (DRV-13), with their Compose meaning:
//
//	deploy.resources.limits.cpus      CPUs (0.25 is a quarter of one)
//	deploy.resources.limits.memory    hard memory limit (swap included)
//	deploy.resources.limits.pids      cap on processes and threads
//	deploy.resources.reservations.memory   soft limit / memory.low
//	mem_limit, cpus, pids_limit, mem_reservation   the service-level
//	    spellings of the same four; a value given both ways must agree.
//
// pids -1 (or 0) is Compose's "unlimited". Reservations of cpus, devices
// and generic resources are refused: engenho has no use for them that
// would mean what the file says.

// resourceServiceKeys are the service-level resource keys.
var resourceServiceKeys = []string{"mem_limit", "mem_reservation", "cpus", "pids_limit"}

// reservationKeys are the keys of deploy.resources.reservations.
var reservationKeys = []string{"memory"}

// MinMemory is the smallest memory limit accepted: below it a program
// dies at its exec, which reads as a crash loop rather than a limit.
const MinMemory = 4 << 20

// MinCPUs is the smallest cpus limit: the kernel's 1ms quota per 100ms
// period.
const MinCPUs = 0.01

// resourceKeys are the resource values a service's own keys gave, with
// where, to merge with deploy.resources once every key is read.
type resourceKeys struct {
	memory, reservation, cpus, pids *entry
	res                             Resources
}

// isResourceKey reports whether key is a service-level resource key.
func isResourceKey(key string) bool {
	for _, k := range resourceServiceKeys {
		if k == key {
			return true
		}
	}
	return false
}

// serviceResource reads one service-level resource key into rk.
func (w *walker) serviceResource(rk *resourceKeys, e entry) {
	e2 := e
	switch e.key {
	case "mem_limit":
		rk.res.MemoryBytes, rk.memory = w.memory(e.vn, e.path), &e2
	case "mem_reservation":
		rk.res.MemoryReservationBytes, rk.reservation = w.memory(e.vn, e.path), &e2
	case "cpus":
		if v, ok := w.number(e.vn, e.path, true); ok {
			rk.res.CPUs, rk.cpus = v, &e2
		}
	case "pids_limit":
		if v, ok := w.pids(e.vn, e.path); ok {
			rk.res.Pids, rk.pids = v, &e2
		}
	}
}

// mergeResources puts the service-level resource keys into the service's
// deploy.resources; a value given both ways must be the same (as Compose
// refuses distinct ones).
func (w *walker) mergeResources(svc *Service, rk resourceKeys) {
	res := &svc.Deploy.Resources
	merge := func(e *entry, top, deploy any, set func(), other string) {
		if e == nil {
			return
		}
		if !isZero(deploy) && top != deploy {
			w.problem(e.kn, e.path, ErrValue, "%s and deploy.resources.%s are both set, to different values: keep one", e.key, other)
			return
		}
		set()
	}
	merge(rk.memory, rk.res.MemoryBytes, res.MemoryBytes, func() { res.MemoryBytes = rk.res.MemoryBytes }, "limits.memory")
	merge(rk.reservation, rk.res.MemoryReservationBytes, res.MemoryReservationBytes, func() { res.MemoryReservationBytes = rk.res.MemoryReservationBytes }, "reservations.memory")
	merge(rk.cpus, rk.res.CPUs, res.CPUs, func() { res.CPUs = rk.res.CPUs }, "limits.cpus")
	merge(rk.pids, rk.res.Pids, res.Pids, func() { res.Pids = rk.res.Pids }, "limits.pids")
}

func isZero(v any) bool {
	switch v := v.(type) {
	case int64:
		return v == 0
	case float64:
		return v == 0
	}
	return false
}

// resources reads deploy.resources: limits and reservations.
func (w *walker) resources(res *Resources, n *yaml.Node, path string) {
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch e.key {
		case "limits":
			w.limits(res, e.vn, e.path)
		case "reservations":
			w.reservations(res, e.vn, e.path)
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, resourcesKeys)
			}
		}
	}
}

func (w *walker) limits(res *Resources, n *yaml.Node, path string) {
	limits, _ := w.mapping(n, path)
	for _, l := range limits {
		switch l.key {
		case "cpus":
			if v, ok := w.number(l.vn, l.path, true); ok {
				res.CPUs = v
			}
		case "memory":
			res.MemoryBytes = w.memory(l.vn, l.path)
		case "pids":
			if v, ok := w.pids(l.vn, l.path); ok {
				res.Pids = v
			}
		default:
			if !isExtension(l.key) {
				w.unknownKey(l, limitsKeys)
			}
		}
	}
}

func (w *walker) reservations(res *Resources, n *yaml.Node, path string) {
	entries, _ := w.mapping(n, path)
	for _, e := range entries {
		switch e.key {
		case "memory":
			res.MemoryReservationBytes = w.memory(e.vn, e.path)
		case "cpus", "devices", "generic_resources":
			w.problem(e.kn, e.path, ErrUnknownKey, "engenho reserves only memory (reservations.memory); %s are not reserved: remove the key, or limit with deploy.resources.limits", e.key)
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, reservationKeys)
			}
		}
	}
}

// pids reads a pids limit: a positive integer, or -1 or 0 for none.
func (w *walker) pids(n *yaml.Node, path string) (int64, bool) {
	v, ok := w.intValue(n, path, "an integer (a number of processes; -1 for no limit)")
	if !ok {
		return 0, false
	}
	if v < -1 {
		w.problem(n, path, ErrValue, "want a number of processes, or -1 for no limit, got %d", v)
		return 0, false
	}
	return int64(max(v, 0)), true
}

// resources checks a service's resource values (SVC-1): what a driver
// could not mean.
func (c *checker) resources(p string, res Resources) {
	lk, rk := p+".resources.limits", p+".resources.reservations"
	switch {
	case res.CPUs < 0 || math.IsNaN(res.CPUs) || math.IsInf(res.CPUs, 0):
		c.add(lk+".cpus", ErrValue, "want a number of CPUs, 0 or more")
	case res.CPUs > 0 && res.CPUs < MinCPUs:
		c.add(lk+".cpus", ErrValue, "want at least %g CPUs (1ms of every 100ms), got %s", MinCPUs, strconv.FormatFloat(res.CPUs, 'g', -1, 64))
	}
	switch {
	case res.MemoryBytes < 0:
		c.add(lk+".memory", ErrValue, "want a size, 0 or more")
	case res.MemoryBytes > 0 && res.MemoryBytes < MinMemory:
		c.add(lk+".memory", ErrValue, "want at least 4m: a program needs some memory to start (got %s)", sizeText(res.MemoryBytes))
	}
	switch {
	case res.MemoryReservationBytes < 0:
		c.add(rk+".memory", ErrValue, "want a size, 0 or more")
	case res.MemoryBytes > 0 && res.MemoryReservationBytes > res.MemoryBytes:
		c.add(rk+".memory", ErrValue, "the reservation %s is above the memory limit %s", sizeText(res.MemoryReservationBytes), sizeText(res.MemoryBytes))
	}
	if res.Pids < 0 {
		c.add(lk+".pids", ErrValue, "want a number of processes, or -1 for no limit")
	}
}

// sizeText is bytes in the file's units: "64m", "1536k", "100".
func sizeText(n int64) string {
	for _, u := range []struct {
		size int64
		unit string
	}{{1 << 30, "g"}, {1 << 20, "m"}, {1 << 10, "k"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.unit)
		}
	}
	return strconv.FormatInt(n, 10)
}
