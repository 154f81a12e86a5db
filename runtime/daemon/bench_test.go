package daemon_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkDaemonRestart measures PERF-4: the daemon running 1,000 process
// replicas is SIGKILLed and started again; the time from the new daemon's
// launch until every replica is adopted and reported serving, and how many
// workload restarts that caused (target: within 5s, 0 restarts). The
// replicas have no healthcheck, so serving means running (SVC-6).
func BenchmarkDaemonRestart(b *testing.B) {
	const services, per = 10, 100
	n := newNode(b)
	n.start("running")
	var st strings.Builder
	st.WriteString("name: many\nservices:\n")
	for i := 0; i < services; i++ {
		fmt.Fprintf(&st, "  s%d:\n    command: [\"/bin/sleep\", \"1000000\"]\n    stop_grace_period: 1s\n    deploy: {replicas: %d}\n", i, per)
	}
	n.mustCLI("apply", n.writeFile("many.yaml", st.String()))
	n.eventually("1,000 replicas serving", 10*time.Minute, func() bool { return serving(n) == services*per })
	before := startTimes(n)
	for i := 0; i < b.N; i++ {
		n.kill()
		start := time.Now()
		n.start("running")
		n.eventually("all adopted", 5*time.Minute, func() bool { return serving(n) == services*per })
		took := time.Since(start)
		restarted := 0
		for inst, at := range startTimes(n) {
			if !before[inst].Equal(at) {
				restarted++
			}
		}
		b.ReportMetric(took.Seconds(), "adopt-s")
		b.ReportMetric(float64(restarted), "restarts")
		b.ReportMetric(0, "ns/op")
	}
	n.mustCLI("remove", "many")
	n.eventually("removed", 5*time.Minute, func() bool { return serving(n) == 0 })
}

func serving(n *node) int {
	st, err := n.status()
	if err != nil {
		return -1
	}
	c := 0
	for _, s := range st.Services {
		for _, r := range s.Replicas {
			if r.Phase == "serving" {
				c++
			}
		}
	}
	return c
}

func startTimes(n *node) map[string]time.Time {
	out := map[string]time.Time{}
	st, _ := n.status()
	for _, s := range st.Services {
		for k, v := range instances(s) {
			out[k] = v
		}
	}
	return out
}
