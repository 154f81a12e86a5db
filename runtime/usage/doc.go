// Package usage samples every running replica's resource usage (spec
// DRV-16): CPU time, memory now and peak, processes, read from each
// replica's driver on one timer, with CPU worked out as cores averaged over
// the last 10 seconds. The daemon shows the samples in status, `engenho
// top` and the metrics; the service actors know nothing of it.
//
// Layer: runtime. It imports drivers, drivers/clock and messages.
package usage
