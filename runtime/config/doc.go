// Package config watches the daemon's configuration (spec DMN-16): Watcher
// reports settled bursts of changes to the config file and to the stack
// files it lists (fsnotify, debounced on the injected clock), so the daemon
// reloads. The file's schema, parser and validation are
// configs/daemonconfig.
//
// Layer: runtime. It imports drivers/clock and configs/daemonconfig (the
// digest and the stack-glob rules); only runtime/daemon imports it.
package config
