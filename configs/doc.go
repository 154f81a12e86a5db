// Package configs holds the shipped configuration: the demo daemon config,
// demo stacks and the systemd unit. The Go files here only embed them so the
// binary can run on the embedded defaults.
package configs
