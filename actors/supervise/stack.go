package supervise

// GrowStack grows the calling goroutine's stack at once to 8 KiB, from
// where it is called.
//
// Hollywood runs each burst of an actor's messages on a new goroutine,
// whose stack starts small: Go sizes new stacks by the average in use at
// the last GC, and these goroutines live too briefly to raise it (2 KiB
// in the profiles). A handler that needs more grows it on the way down,
// by doubling and copying, and a copy costs a walk of every frame on the
// stack: deep in a handler that is ~20 frames, and it may happen twice.
// Called first thing in Receive, the stack is grown once a burst, while
// only hollywood's and the cell's frames sit below; later calls in the
// burst cost the zeroing of the 4 KiB (~0.1 µs). A replica's
// probe (a timer and a result, two bursts) took 25.6-26.8 µs of CPU and
// now 22.5-22.7 µs (BenchmarkPERF3IdleCPU, ENGENHO_BENCH_HEALTH=1s; PERF-3,
// docs/decisions.md).
//
//go:noinline
func GrowStack() {
	var pad [4 << 10]byte
	keep(pad[:])
}

// keep makes pad used, so that the compiler keeps GrowStack's frame.
//
//go:noinline
func keep(pad []byte) { pad[0] = 1 }
