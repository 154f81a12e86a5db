// Command engenho: one file per subcommand. `daemon` runs the node
// supervisor; the others are clients of its control socket (spec DMN-12).
package main
