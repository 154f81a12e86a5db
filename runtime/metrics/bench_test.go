package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/messages"
)

// BenchmarkScrape10k: one scrape of a node running 1,000 services of 10
// replicas each (the PERF-3 scale), tree and statuses included.
func BenchmarkScrape10k(b *testing.B) {
	var nodes []supervise.Node
	var services []messages.ServiceStatus
	for s := range 1000 {
		svc := fmt.Sprintf("svc%d", s)
		nodes = append(nodes, supervise.Node{Path: "root/stack:big/service:" + svc, State: "running"})
		st := messages.ServiceStatus{Stack: "big", Service: svc, State: messages.ServiceConverged, Desired: 10, Running: 10, Healthy: 10}
		for r := 1; r <= 10; r++ {
			nodes = append(nodes, supervise.Node{Path: fmt.Sprintf("root/stack:big/service:%s/replica:%d", svc, r), State: "running"})
			st.Replicas = append(st.Replicas, messages.ReplicaStatus{Slot: r, Restarts: r % 3, HasLedger: r == 1, Ledger: messages.Ledger{Failures: 1}})
		}
		services = append(services, st)
	}
	m := New(Options{Actors: func() []supervise.Node { return nodes }, Services: func() []messages.ServiceStatus { return services }, NoRuntimeCollectors: true})
	h := m.Handler()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
		_, _ = io.Copy(io.Discard, rec.Body)
	}
}
