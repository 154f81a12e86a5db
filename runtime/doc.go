// Package runtime holds the daemon's machinery that is not an actor: the
// clock, the lifecycle state machine and the loop that performs its effects,
// the journal, the control socket, configuration, the HTTP edge and the TCP
// balancer. Each lives in its own subpackage.
package runtime
