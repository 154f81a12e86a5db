package balancer

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Benchmarks compare a connection through the balancer with a direct one
// to the same server, side by side (spec quality: ratios, not timings).
//
//	go test -run '^$' -bench . -benchtime 2s ./runtime/balancer/

// benchServer accepts connections and runs handle on each.
type benchServer struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startBenchServer(b *testing.B, handle func(net.Conn)) *benchServer {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &benchServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	b.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func echo(c net.Conn) { io.Copy(c, c) }

// source writes zeros until the client goes away.
func source(c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// targets returns the direct address and one through a balancer.
func targets(b *testing.B, srv *benchServer) map[string]string {
	b.Helper()
	bal := New(Options{})
	b.Cleanup(bal.Shutdown)
	if err := bal.Listen("bench", "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	bal.SetBackends("bench", []Backend{{ID: "s", Addr: srv.ln.Addr().String()}})
	addr, _ := bal.Addr("bench")
	return map[string]string{"direct": srv.ln.Addr().String(), "balancer": addr.String()}
}

func eachTarget(b *testing.B, handle func(net.Conn), run func(b *testing.B, addr string)) {
	t := targets(b, startBenchServer(b, handle))
	for _, name := range []string{"direct", "balancer"} {
		b.Run(name, func(b *testing.B) { run(b, t[name]) })
	}
}

// Throughput of one long connection (64 KiB reads).
func BenchmarkThroughput(b *testing.B) {
	eachTarget(b, source, func(b *testing.B, addr string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		b.SetBytes(int64(len(buf)))
		b.ResetTimer()
		for b.Loop() {
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Round trip of one byte on an open connection: the latency the balancer
// adds to every exchange.
func BenchmarkRoundTrip(b *testing.B) {
	eachTarget(b, echo, func(b *testing.B, addr string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		buf := []byte{1}
		for b.Loop() {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A new connection per operation (connect, one round trip, close): the
// cost of accept, pick and dial.
func BenchmarkConnect(b *testing.B) {
	eachTarget(b, echo, func(b *testing.B, addr string) {
		buf := []byte{1}
		for b.Loop() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
}

// Parallel short connections from several clients to four backends.
func BenchmarkConnectParallel(b *testing.B) {
	srv := startBenchServer(b, echo)
	bal := New(Options{})
	b.Cleanup(bal.Shutdown)
	if err := bal.Listen("bench", "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	var backends []Backend
	for _, id := range []string{"a", "b", "c", "d"} {
		backends = append(backends, Backend{ID: id, Addr: srv.ln.Addr().String()})
	}
	bal.SetBackends("bench", backends)
	addr, _ := bal.Addr("bench")
	b.RunParallel(func(pb *testing.PB) {
		buf := []byte{1}
		for pb.Next() {
			c, err := net.Dial("tcp", addr.String())
			if err != nil {
				b.Error(err)
				return
			}
			c.Write(buf)
			io.ReadFull(c, buf)
			c.Close()
		}
	})
}
