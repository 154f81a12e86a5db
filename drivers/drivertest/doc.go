// Package drivertest is the conformance suite every instance driver passes
// (spec DRV-2): process, incus and fake run the same tests through Run with a
// Harness that gives the driver and builds specs from small POSIX sh scripts.
// It also holds Need, which skips (or, under ENGENHO_REQUIRE, fails) tests
// that need a component such as incus or s3.
//
// Layer: drivers. It imports the drivers package only; the drivers'
// tests import it.
package drivertest
