// Package status is the board of published snapshots (spec SUP-3): every
// actor stores an immutable value of its status after each change, and
// status readers (the control socket, metrics, engenho tree) copy from the
// board without ever asking, or waiting on, an actor.
package status
