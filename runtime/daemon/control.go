package daemon

import (
	"github.com/engenho/engenho/runtime/control"
)

// Version is reported by status; the command sets it at start.
var Version = "dev"

// startControl opens the control socket. It serves in every lifecycle
// state, so start, retry and reinit work while stopped or failed.
func (d *Daemon) startControl() error {
	s := d.settings
	srv, err := control.NewServer(control.Options{
		Path: d.dir.Socket(), Group: s.ControlGroup, MaxRequest: s.ControlMaxRequest, IdleTimeout: s.ControlIdleTimeout,
		Clock: d.clk, Logger: d.log.Logger, Handler: &handler{d: d, version: Version},
	})
	if err != nil {
		return err
	}
	d.control = srv
	go func() {
		if err := srv.Serve(); err != nil {
			d.log.Error().Err(err).Msg("control socket stopped")
		}
	}()
	return nil
}

func (d *Daemon) stopControl() {
	if d.control != nil {
		_ = d.control.Close()
	}
}
