// Package runtime holds the node: the daemon's machinery that boots and
// serves the supervision tree and is not an actor: the lifecycle state
// machine and the loop that performs its effects (daemon), the journal, the
// control socket, the config watcher, the HTTP edge, the TCP balancer,
// metrics, logging, the data directory, the node key and sd_notify. Each
// lives in its own subpackage.
//
// Layer: runtime, the node: everything that boots and serves the tree. Its
// subpackages import the layers below (actors, messages, configs, drivers);
// between siblings only control imports lifecycle, controltest imports
// control, and runtime/daemon, the composition root, imports the rest.
package runtime
