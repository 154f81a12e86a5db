package main

import (
	"time"

	"github.com/engenho/engenho/messages"
)

// replicationCells are a host's replication columns in status (ACT-17):
// its class, how long ago the last checkpoint that uploaded anything
// began ("-" never), and the current loss window (awake or stopping
// hosts only, "-" otherwise).
func replicationCells(h messages.HostStatus, now time.Time) (class, shipped, window string) {
	class, shipped, window = h.Replication, "-", "-"
	if class == "" {
		class = "-"
	}
	if !h.LastShipped.IsZero() {
		shipped = since(now, h.LastShipped) + " ago"
	}
	if h.State == messages.HostAwake || h.State == messages.HostStopping {
		window = short(h.LossWindow(now))
	}
	return class, shipped, window
}
