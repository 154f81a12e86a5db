package chaos

import (
	"context"
	"net"
	"testing"
	"time"
)

// Issue 18 (soak seed 424242, fault 118): workload.oom asks the workload
// over HTTP to allocate past its limit. A workload that does not listen
// yet refuses the connection: that is no OOM kill, and must not be taken
// for one; a connection cut once the request was made is the kill.
func TestAnAllocationRefusedIsNotAnOOMKill(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := askToAllocate(ctx, "http://"+addr+"/alloc"); !refused(err) {
		t.Errorf("nothing listening: %v, want it called refused", err)
	}

	cut, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	go func() {
		for {
			c, err := cut.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			_, _ = c.Read(buf) // the request arrives; the process dies
			c.Close()
		}
	}()
	_, err = askToAllocate(context.Background(), "http://"+cut.Addr().String()+"/alloc")
	if err == nil || refused(err) {
		t.Errorf("connection cut during the request: %v, want an error that is not a refusal", err)
	}
}
