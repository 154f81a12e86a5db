// Package clock is the one clock interface every timer and timestamp in
// engenho goes through (spec SUP-19). Production code uses Real; tests use
// Fake, which only moves when the test advances it, so a 15m backoff is
// crossed in microseconds.
//
// Layer: drivers/clock, the bottom. It imports nothing from the module; every
// package above may import it.
package clock
