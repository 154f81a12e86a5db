// Package controltest has a fake control.Handler for tests of the control
// socket, its clients and the CLI: canned results, recorded calls, streams
// fed from channels.
//
// Layer: runtime. It imports runtime/control, runtime/lifecycle and
// messages; tests import it.
package controltest
