package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers/clock"
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// Path is the socket file, normally DATA/control/engenho.sock.
	Path string
	// Group, when set (a name or a gid), makes the socket 0660 owned by
	// that group and lets its members connect; otherwise the socket is 0600.
	Group string
	// MaxRequest bounds a request line (default 1 MiB).
	MaxRequest int
	// IdleTimeout closes a connection with nothing in flight that sent no
	// request for this long (default 5m).
	IdleTimeout time.Duration
	// WriteTimeout closes a connection whose client does not read an
	// answer line within it (default 10s).
	WriteTimeout time.Duration
	// MaxConns bounds concurrent connections (default 64).
	MaxConns int
	// MaxInFlight bounds requests in flight on one connection (default 16).
	MaxInFlight int
	// Clock times the idle and write timeouts (default the wall clock).
	Clock clock.Clock
	// Logger gets refusals and handler failures; the zero Logger logs
	// nothing.
	Logger zerolog.Logger
	// Handler answers the ops.
	Handler Handler
}

func (o Options) withDefaults() Options {
	if o.MaxRequest <= 0 {
		o.MaxRequest = DefaultMaxRequest
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 5 * time.Minute
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	return o
}

// Server serves the control socket (DMN-11). NewServer binds the socket;
// Serve accepts until Close.
type Server struct {
	opts   Options
	log    zerolog.Logger
	l      *net.UnixListener
	sock   socketFile
	access access
	// ctx ends every connection's requests on Close.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	serving bool
	conns   map[*conn]struct{}
	wg      sync.WaitGroup // the accept loop and every connection
}

// NewServer checks the options, binds the socket with its final mode and
// returns a server ready to Serve.
func NewServer(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if opts.Handler == nil {
		return nil, errors.New("control: no handler")
	}
	if opts.Path == "" {
		return nil, errors.New("control: no socket path")
	}
	acc := access{self: uint32(os.Getuid()), groupsOf: userGroups}
	if opts.Group != "" {
		gid, err := resolveGroup(opts.Group)
		if err != nil {
			return nil, fmt.Errorf("control socket: %w", err)
		}
		acc.group, acc.hasGroup = gid, true
	}
	l, sock, err := listen(opts.Path, acc.group, acc.hasGroup)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		opts: opts, log: opts.Logger.With().Str("component", "control").Logger(),
		l: l, sock: sock, access: acc, ctx: ctx, cancel: cancel,
		conns: map[*conn]struct{}{},
	}, nil
}

// Path is the socket file.
func (s *Server) Path() string { return s.sock.path }

// Serve accepts connections until Close, then returns nil. It may be
// called once.
func (s *Server) Serve() error {
	s.mu.Lock()
	if s.closed || s.serving {
		s.mu.Unlock()
		return errors.New("control: server closed or already serving")
	}
	s.serving = true
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	var pause time.Duration
	for {
		nc, err := s.l.AcceptUnix()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			// Out of file descriptors and the like: pause, do not spin.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.log.Warn().Err(err).Dur("pause", pause).Msg("accept failed")
			if !s.sleep(pause) {
				return nil
			}
			continue
		}
		pause = 0
		s.admit(nc)
	}
}

// sleep waits d on the clock; false if the server closed meanwhile.
func (s *Server) sleep(d time.Duration) bool {
	t := s.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// admit starts serving nc, or turns it away when the server is full.
func (s *Server) admit(nc *net.UnixConn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.opts.MaxConns {
		s.mu.Unlock()
		// A fresh socket's buffer takes this short line without blocking.
		_, _ = nc.Write(encodeLine(outLine{Error: Errorf(CodeBusy, "too many connections (%d); try again", s.opts.MaxConns)}))
		nc.Close()
		s.log.Debug().Int("max_conns", s.opts.MaxConns).Msg("connection turned away: too many connections")
		return
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		c.serve()
		// Free the slot before the client sees the close.
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		nc.Close()
	}()
}

// Close stops accepting, ends every request in flight (streams get a final
// unavailable line), closes every connection, waits for them and removes
// the socket file. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	err := s.l.Close()
	for _, c := range conns {
		c.stopReading(nil)
	}
	s.wg.Wait()
	s.sock.remove()
	return err
}
