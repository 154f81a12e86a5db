// Package incus is the incus instance driver (spec DRV-5, DRV-6, DRV-7):
// each instance is an incus container, driven through a small REST client
// of its own (client.go, api.go) over incusd's unix socket or HTTPS with a
// client certificate. It does not use github.com/lxc/incus/v6.
//
// A spec's Command becomes the container's init: Create writes an
// entrypoint script into the container (/.engenho/entrypoint, set as
// lxc.init.cmd through raw.lxc) that brings loopback up, sends the
// command's output to /.engenho/output.log, passes stop signals on and
// records the exit code in /.engenho/exit-code, so the container's life is
// the command's life. Labels are user.* config keys, Env environment.*
// keys, published ports proxy devices on host loopback. Watch is a poller
// (one goroutine per Driver). setup.sh installs and starts a local incusd
// with a busybox image for tests and CI.
//
// Layer: drivers. It imports drivers and drivers/clock only (its own REST
// client, not the incus Go module).
package incus
