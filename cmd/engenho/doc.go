// Command engenho: one file per subcommand. `daemon` runs the node
// supervisor; the others are clients of its control socket (spec DMN-12).
//
// Layer: cmd, the top: it may import any layer. It calls daemon.New/Run and
// the control client and wires nothing else. Only its files tagged chaos
// (chaos.go, chaos_hooks.go) import chaos/.
package main
