package messages

import "time"

// ReplicaUsage is the last usage sample of a running replica (DRV-16),
// as the daemon's sampler read it from the driver; status shows it.
type ReplicaUsage struct {
	// At is when it was read.
	At time.Time `json:"at"`
	// CPUSeconds is the driver's CPU time counter (see drivers.Usage).
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUCores is the CPU used, in cores, averaged over the last 10s (or
	// the samples within it); absent until two samples exist.
	CPUCores *float64 `json:"cpu_cores,omitempty"`
	// MemoryBytes now, MemoryPeakBytes the highest seen (drivers.Usage).
	MemoryBytes     int64 `json:"memory_bytes"`
	MemoryPeakBytes int64 `json:"memory_peak_bytes"`
	Pids            int64 `json:"pids"`
}
