// Package drivers defines the one instance-driver contract every workload
// backend meets (spec DRV-1) and its typed errors. The backends live in
// subpackages: process (the embedded default), incus, fake; drivertest is the
// conformance suite they all pass (DRV-2); objstore holds the object stores;
// ports hands out instances' host ports from the node's range (SVC-24).
//
// Layer: drivers (everything that touches the OS). It imports drivers/clock
// only; its subpackages import it.
package drivers
