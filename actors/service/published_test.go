package service

import (
	"net"
	"testing"
)

// SVC-22: a listener is taken for the one a definition asks for when the
// port and IP match, any wildcard matching any other: Go reports a
// listener asked for on 0.0.0.0 as bound on [::] (checked below against a
// real listener), and a port must not be closed and opened again for it.
func TestSameAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if !sameAddr(ln.Addr().String(), "0.0.0.0:"+port) {
		t.Errorf("bound %s is not the asked-for 0.0.0.0:%s", ln.Addr(), port)
	}
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"[::]:80", "0.0.0.0:80", true},
		{"127.0.0.1:80", "127.0.0.1:80", true},
		{"[::1]:80", "[::1]:80", true},
		{"127.0.0.1:80", "0.0.0.0:80", false},
		{"[::]:80", "127.0.0.1:80", false},
		{"0.0.0.0:80", "0.0.0.0:81", false},
	} {
		if got := sameAddr(c.a, c.b); got != c.same {
			t.Errorf("sameAddr(%s, %s) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
