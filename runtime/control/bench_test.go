package control_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/control/controltest"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// bigStatus is a node of n services with 3 replicas each, every field a
// real status would fill.
func bigStatus(n int) control.StatusResult {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	res := control.StatusResult{Daemon: control.DaemonStatus{
		Lifecycle: lifecycle.State{Name: lifecycle.Running, Epoch: 4, Attempt: 1},
		Node:      control.NodeIdentity{Name: "edge-1", ID: "7f3a9c"}, PID: 4242, StartedAt: now,
	}}
	for s := range n / 10 {
		st := messages.StackStatus{Stack: fmt.Sprintf("stack-%d", s), Deployment: "d-0001", Converged: true, UpdatedAt: now}
		for i := range 10 {
			st.Services = append(st.Services, fmt.Sprintf("svc-%d", i))
		}
		res.Stacks = append(res.Stacks, st)
	}
	for i := range n {
		svc := messages.ServiceStatus{
			Stack: fmt.Sprintf("stack-%d", i/10), Service: fmt.Sprintf("svc-%d", i%10),
			State: messages.ServiceConverged, Message: "3/3 healthy", Revision: "3f9a2c1b7d4e", Deployment: "d-0001",
			Driver: "process", Desired: 3, Running: 3, Healthy: 3, UpdatedAt: now,
			Ports: []messages.PortStatus{{Listen: fmt.Sprintf("0.0.0.0:%d", 20000+i), Target: 8080,
				Backends: []string{"127.0.0.1:31001", "127.0.0.1:31002", "127.0.0.1:31003"}, Accepted: 123456, Active: 4, Rate: 12.5}},
		}
		for slot := 1; slot <= 3; slot++ {
			svc.Replicas = append(svc.Replicas, messages.ReplicaStatus{
				Stack: svc.Stack, Service: svc.Service, Slot: slot, ID: fmt.Sprintf("a%07d", i*3+slot),
				Instance: fmt.Sprintf("%s-%s-%d-a%07d", svc.Stack, svc.Service, slot, i*3+slot), Revision: svc.Revision, Deployment: "d-0001",
				Phase: "serving", Health: "healthy", InRotation: true, Addresses: map[int]string{8080: fmt.Sprintf("127.0.0.1:%d", 31000+slot)},
				CreatedAt: now, StartedAt: now, ServingSince: now, Restarts: 1, LastProbe: "HTTP 200 OK: ok",
				HasLedger: true, Ledger: messages.Ledger{Failures: 1, LastReason: "exited with code 1", LastFailure: now, NextAttempt: now, StableSince: now},
			})
		}
		res.Services = append(res.Services, svc)
	}
	return res
}

// BenchmarkPERF7Status1000Services is PERF-7: a client's status round trip
// of 1,000 services with 3 replicas each over the real socket, encoding and
// decoding included. Target: <= 50 ms per op.
func BenchmarkPERF7Status1000Services(b *testing.B) {
	f := &controltest.Fake{StatusResult: bigStatus(1000)}
	s := serve(b, f, nil)
	c := dial(b, s.path)
	ctx := ctx(b)
	var bytes int
	for b.Loop() {
		res, err := c.Status(ctx, control.StatusArgs{})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Services) != 1000 || len(res.Services[999].Replicas) != 3 {
			b.Fatalf("short status: %d services", len(res.Services))
		}
		bytes = len(res.Services)
	}
	_ = bytes
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/status")
}

// BenchmarkPERF7Baseline is the floor PERF-7 is compared with in the same
// run: encoding/json marshal and unmarshal of the same status in process,
// no socket, no protocol.
func BenchmarkPERF7Baseline(b *testing.B) {
	st := bigStatus(1000)
	for b.Loop() {
		raw, err := json.Marshal(st)
		if err != nil {
			b.Fatal(err)
		}
		var back control.StatusResult
		if err := json.Unmarshal(raw, &back); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/status")
}
