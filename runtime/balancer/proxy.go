package balancer

import (
	"io"
	"net"
)

// proxy copies both directions between client and server until both have
// ended, using exactly one extra goroutine. A clean end of one direction
// (EOF) is passed on as a half-close, so the other direction keeps
// flowing; an error in either closes both, which ends the other.
func proxy(client, server net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(server, client)
	}()
	pipe(client, server)
	<-done
}

// pipe copies src to dst.
func pipe(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if hc, ok := dst.(interface{ CloseWrite() error }); ok {
		if hc.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
}
