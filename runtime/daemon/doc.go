// Package daemon is engenho's daemon: the loop that feeds the pure
// lifecycle (runtime/lifecycle) its events and performs the one effect each
// step returns: the boot phases (resolve the config, open the journal, get
// the drivers ready, start the supervision tree, listen), the drain, the
// journal release and the exit (spec DMN-1..DMN-19). It also owns the
// node's desired state: every change is recorded in the journal, synced,
// before the tree hears of it and before the request is answered.
//
// Layer: runtime, its top: the composition root. It may import every layer
// below and every runtime package; it connects the ports the actors declare
// (service.Ports, host.Routes, the journals, the emitters) to the concrete
// services in drivers/ and runtime/. It imports nothing from chaos/: fault
// injection reaches it only through Options.Hooks.
package daemon
